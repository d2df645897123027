import Foundation
import HeraldCore

/// An app's Honor phones (Magic UI), through Honor Push (route `honor`), registered with their
/// push token (`honor_token`). Made from the app's row of `herald.app_honor`: its push app id and
/// its OAuth 2.0 client (id, and the file holding its secret).
struct HonorRoute: TokenRoute {
    static let name = "honor"
    static let displayName = "Honor Push"
    static let scopes: [ConfigurationScope] = [.honor]
    static let tokenKind = "honor_token"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    /// The app's row of `herald.app_honor`.
    struct Setup: Equatable, Sendable, Decodable {
        var honorAppID: String
        var clientID: String
        var clientSecretFile: String

        enum CodingKeys: String, CodingKey {
            case honorAppID = "honor_app_id"
            case clientID = "client_id"
            case clientSecretFile = "client_secret_file"
        }
    }

    let client: HonorPushClient
    /// The app's client, as every daemon knows whether Honor Push accepted it: Honor's API
    /// descends from Huawei's, which answers a token of another app's credentials as a dead one
    /// (80300007), so that answer disables a phone only once the client is known to be the app's.
    let credentials: AcceptedCredentials
    let accepted: AcceptedCredentials.SeenHere
    /// Until when the app's sends wait after Honor Push refused them for its rate, for every
    /// daemon.
    let rate: ProviderPause

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> HonorRoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has Honor push tokens but no row in herald.app_honor")
        }
        let secret = try ConfigurationProblem.secret(
            inFile: setup.clientSecretFile, app: app, what: "the Honor client secret file")
        shared.logger.info(
            "loaded the Honor Push setup",
            metadata: ["app": "\(app)", "honor_app_id": "\(setup.honorAppID)", "client_id": "\(setup.clientID)"])
        let account = "app \(setup.honorAppID) client \(setup.clientID)"
        return HonorRoute(
            client: HonorPushClient(
                appID: setup.honorAppID, clientID: setup.clientID, clientSecret: secret,
                endpoint: shared.configuration.endpoints[name], http: shared.http, logger: shared.logger),
            credentials: AcceptedCredentials(app: app, provider: name, account: account),
            accepted: shared.shared("honor accepted \(app) \(account)") { AcceptedCredentials.SeenHere() },
            rate: shared.shared("honor rate \(app)") { ProviderPause(provider: name, account: "app \(app)") })
    }

    /// Honor Push has no validate-only request: a dry run is built, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        let live = batch.filter { !$0.notification.dryRun }
        var events = batch.filter(\.notification.dryRun).map { ($0, DeliveryLife.Event.checked(at: now)) }
        guard !live.isEmpty else { return events }
        if let outcome = await rate.holdsBack(now, context: context) {
            return events + live.map { ($0, .sent(outcome, dryRun: false, at: now)) }
        }
        let results = await credentials.remembered(
            seen: accepted, context: context,
            send: { await client.send(live.map { message(for: $0, builder: builder, now: now) }) },
            isAccepted: { if case .sent = $0.outcome { true } else { false } })
        let at = context.clock.now()
        for (delivery, result) in zip(live, results) {
            var outcome = result.outcome
            if case .tokenInvalid = outcome, result.code == HonorResult.allTokensInvalid, !accepted.value {
                outcome = AcceptedCredentials.unproven(
                    "Honor Push answered 80300007 (all tokens invalid)",
                    check: "herald.app_honor's honor_app_id, client_id and secret", scope: .honor)
            }
            await rate.pause(for: outcome, at: at, context: context)
            events.append((delivery, .sent(outcome, dryRun: false, at: at)))
        }
        return events
    }

    /// A delivery as an Honor Push message. A notification with a title or a body is one the
    /// phone shows (one not given takes the other's text), its importance from its message class
    /// (NORMAL for service, LOW for marketing, which Honor shows quietly and limits to a few a
    /// day on each phone), its tap opening the app or its deep link, its `notifyId` from the
    /// notification's id, so a repeated send replaces it. A silent one, or one with only data, is
    /// a pass-through message.
    func message(for delivery: OutgoingDelivery, builder: PayloadBuilder, now: Date) -> HonorMessage {
        let notification = delivery.notification
        let data = JSONValue.object(builder.androidData(delivery).map { ($0.0, .string($0.1)) })
        var shown: (title: String, body: String, tap: PayloadBuilder.Tap, service: Bool, notifyID: Int)?
        if let text = PayloadBuilder.shownText(notification) {
            shown = (
                text.title, text.body, PayloadBuilder.Tap(deepLink: notification.deepLink),
                notification.messageClass == .service, PayloadBuilder.notifyID(notification.id)
            )
        }
        return HonorMessage(
            token: delivery.target?.deviceToken ?? "", data: String(decoding: data.encodedBytes, as: UTF8.self),
            shown: shown, ttl: PayloadBuilder.ttl(delivery, now: now))
    }
}
