import Foundation
import HeraldCore
import HeraldPushKit

extension OutgoingDelivery.PayloadKind {
    /// A notification Push Kit shows on a HarmonyOS NEXT phone.
    static let harmonyAlert = Self(rawValue: "harmony_alert")
    /// A silent notification to a HarmonyOS NEXT phone: data for the app.
    static let harmonyBackground = Self(rawValue: "harmony_background")
}

/// An app's HarmonyOS NEXT phones, through Push Kit's v3 API (route `harmony`), registered with
/// their Push Kit token (`harmony_token`). Made from the app's service-account key file and the
/// category its service notifications go as (`herald.app_harmony`); a marketing one goes as
/// MARKETING.
struct HarmonyRoute: TokenRoute {
    static let name = "harmony"
    static let displayName = "HarmonyOS Push Kit"
    static let scopes: [ConfigurationScope] = [.harmony]
    static let tokenKind = "harmony_token"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.harmonyAlert, .harmonyBackground]

    /// The app's row of `herald.app_harmony`.
    struct Setup: Equatable, Sendable, Decodable {
        var serviceAccountFile: String
        var category: String
        var receiptID: String?

        enum CodingKeys: String, CodingKey {
            case serviceAccountFile = "service_account_file"
            case category
            case receiptID = "receipt_id"
        }
    }

    let client: HarmonyClient
    /// The service account (its project and key id), as every daemon knows whether Push Kit
    /// accepted it.
    let credentials: AcceptedCredentials
    /// The category of its service notifications.
    let category: String
    /// The receipt configuration its messages' receipts go by; nil: the app's default.
    let receiptID: String?
    /// Until when the app's sends wait after Push Kit's traffic control (its limit is each app's),
    /// for every daemon.
    let trafficControl: ProviderPause

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> HarmonyRoute
    {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has HarmonyOS Push Kit tokens but no row in herald.app_harmony")
        }
        let account: HarmonyServiceAccount
        do {
            account = try HarmonyServiceAccount.load(file: setup.serviceAccountFile)
        } catch {
            throw ConfigurationProblem("app \(app): \(error.description)")
        }
        shared.logger.info(
            "loaded the HarmonyOS Push Kit setup",
            metadata: ["app": "\(app)", "project": "\(account.projectID)", "key_id": "\(account.keyID)"])
        return HarmonyRoute(
            client: HarmonyClient(
                account: account, endpoint: shared.configuration.endpoints[name], http: shared.http,
                logger: shared.logger),
            credentials: AcceptedCredentials(
                app: app, provider: name, account: "project \(account.projectID) key \(account.keyID)"),
            category: setup.category, receiptID: setup.receiptID,
            trafficControl: shared.shared("harmony traffic control \(app)") {
                ProviderPause(provider: name, account: "app \(app)")
            })
    }

    /// Push Kit's v3 API has no validate-only request (its test messages are delivered): a dry
    /// run is built and its size checked, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        var live: [(OutgoingDelivery, HarmonyMessage)] = []
        for delivery in batch {
            var message = builder.harmonyMessage(
                for: delivery, category: delivery.notification.messageClass == .service ? category : "MARKETING",
                now: now)
            message.receiptTag = ProviderReceipt.tag(deliveryID: delivery.deliveryID)
            message.receiptID = receiptID
            if let tooLarge = message.tooLarge {
                events.append(
                    (
                        delivery,
                        .sent(.permanentFailure(reason: tooLarge), dryRun: delivery.notification.dryRun, at: now)
                    ))
            } else if delivery.notification.dryRun {
                events.append((delivery, .checked(at: now)))
            } else {
                live.append((delivery, message))
            }
        }
        guard !live.isEmpty else { return events }
        if let outcome = await trafficControl.holdsBack(now, context: context) {
            return events + live.map { ($0.0, .sent(outcome, dryRun: false, at: now)) }
        }
        let outcomes = await credentials.remembered(
            context: context, accepted: { client.credentialsAccepted }, noteAccepted: client.noteCredentialsAccepted
        ) { await client.send(live.map(\.1)) }
        let at = context.clock.now()
        for outcome in outcomes { await trafficControl.pause(for: outcome, at: at, context: context) }
        events += zip(live, outcomes).map { ($0.0, .sent($1, dryRun: false, at: at)) }
        return events
    }
}

extension PayloadBuilder {
    /// A delivery as a v3 message. A notification is one Push Kit shows (push-type 0, under the
    /// app's `category`); the producer's data and Herald's keys ride in `clickAction.data`, which
    /// the app reads from the Want that opens it (`want.parameters`), and a deep link opens its
    /// page (`clickAction.uri`). Push Kit requires a title and a body, neither empty: one not
    /// given takes the other's text. Its `notifyId`, from the notification's id, makes a repeated
    /// send (at least once) replace the notification rather than add one; its badge is at most
    /// 99, as Push Kit takes it. A silent notification, or one with nothing to show, is a
    /// background message (push-type 6): the same keys, as a JSON object in `extraData`, handed
    /// to the running app.
    func harmonyMessage(for delivery: OutgoingDelivery, category: String, now: Date) -> HarmonyMessage {
        let notification = delivery.notification
        let token = delivery.target?.deviceToken ?? ""
        let ttl = Self.ttl(delivery, now: now)
        let data = JSONValue.object(merged(notification.data, heraldKeys(delivery)).map { ($0.0, .string($0.1)) })
        guard delivery.payloadKind == .harmonyAlert,
            !(notification.title ?? "").isEmpty || !(notification.body ?? "").isEmpty
        else {
            return HarmonyMessage(
                token: token, pushType: .background,
                payload: .object([("extraData", .string(String(decoding: data.encodedBytes, as: UTF8.self)))]),
                ttl: ttl)
        }
        var click: [(String, JSONValue)] = [("actionType", .int(notification.deepLink == nil ? 0 : 1))]
        if let link = notification.deepLink { click.append(("uri", .string(link))) }
        click.append(("data", data))
        let title = notification.title.flatMap { $0.isEmpty ? nil : $0 } ?? notification.body ?? ""
        let body = notification.body.flatMap { $0.isEmpty ? nil : $0 } ?? title
        var shown: [(String, JSONValue)] = [
            ("category", .string(category)), ("title", .string(title)), ("body", .string(body)),
            ("clickAction", .object(click)), ("notifyId", .int(Self.notifyID(notification.id))),
        ]
        if let image = notification.imageURL { shown.append(("image", .string(image))) }
        if let badge = notification.badge { shown.append(("badge", .object([("setNum", .int(min(badge, 99)))]))) }
        return HarmonyMessage(
            token: token, pushType: .alert, payload: .object([("notification", .object(shown))]), ttl: ttl)
    }
}
