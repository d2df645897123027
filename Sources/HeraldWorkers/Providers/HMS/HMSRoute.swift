import Foundation
import HeraldCore
import HeraldPushKit

/// An app's Android phones with HMS Core, through Huawei Push Kit (route `hms`): phones without
/// Google's services, registered with their Push Kit token (`hms_token`). Made from the app's
/// OAuth 2.0 client id and the file holding its client secret (`herald.app_hms`).
struct HMSRoute: TokenRoute {
    static let name = "hms"
    static let displayName = "Huawei Push Kit"
    static let scopes: [ConfigurationScope] = [.hms]
    static let tokenKind = "hms_token"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    /// The app's row of `herald.app_hms`.
    struct Setup: Equatable, Sendable, Decodable {
        var clientID: String
        var clientSecretFile: String
        var receiptID: String?

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id"
            case clientSecretFile = "client_secret_file"
            case receiptID = "receipt_id"
        }
    }

    let client: HMSClient
    /// The app's client id, as every daemon knows whether Push Kit accepted it.
    let credentials: AcceptedCredentials
    /// Until when the app's sends wait after Push Kit's traffic control, for every daemon, so
    /// that what comes next waits too rather than being refused in turn.
    let trafficControl: ProviderPause
    /// The receipt configuration its messages' receipts go by; nil: the app's default.
    let receiptID: String?

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> HMSRoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has Huawei Push Kit tokens but no row in herald.app_hms")
        }
        let secret = try ConfigurationProblem.secret(
            inFile: setup.clientSecretFile, app: app, what: "the Huawei client secret file")
        shared.logger.info(
            "loaded the Huawei Push Kit setup", metadata: ["app": "\(app)", "client_id": "\(setup.clientID)"])
        return HMSRoute(
            client: HMSClient(
                clientID: setup.clientID, clientSecret: secret, endpoint: shared.configuration.endpoints[name],
                http: shared.http, logger: shared.logger),
            credentials: AcceptedCredentials(app: app, provider: name, account: setup.clientID),
            trafficControl: shared.shared("hms traffic control \(setup.clientID)") {
                ProviderPause(provider: name, account: "client \(setup.clientID)")
            }, receiptID: setup.receiptID)
    }

    /// A dry run is Push Kit's `validate_only`: checked by Huawei, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        if let outcome = await trafficControl.holdsBack(now, context: context) {
            return batch.map { ($0, .sent(outcome, dryRun: $0.notification.dryRun, at: now)) }
        }
        return await credentials.remembered(
            context: context, accepted: { client.credentialsAccepted }, noteAccepted: client.noteCredentialsAccepted
        ) { await sendEach(batch, builder: builder, now: now, context: context) }
    }

    /// Sends the deliveries, the dry runs apart (Push Kit's `validate_only`).
    private func sendEach(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext)
        async -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        for dryRun in [false, true] {
            let part = batch.filter { $0.notification.dryRun == dryRun }
            guard !part.isEmpty else { continue }
            let messages = part.map { delivery in
                HMSMessage(
                    token: delivery.target?.deviceToken ?? "", data: builder.androidData(delivery),
                    urgent: delivery.notification.priority != "normal", ttl: PayloadBuilder.ttl(delivery, now: now),
                    receiptTag: ProviderReceipt.tag(deliveryID: delivery.deliveryID), receiptID: receiptID)
            }
            let outcomes = await client.send(messages, validateOnly: dryRun)
            let at = context.clock.now()
            for outcome in outcomes { await trafficControl.pause(for: outcome, at: at, context: context) }
            events += zip(part, outcomes).map { ($0, .sent($1, dryRun: dryRun, at: at)) }
        }
        return events
    }
}
