import Foundation
import HeraldCore

/// An app's Xiaomi phones (MIUI, HyperOS), through Mi Push (route `xiaomi`), registered with
/// their regId (`xiaomi_regid`). Made from the app's row of `herald.app_xiaomi`: the file holding
/// its AppSecret, its package name, the region its phones are in (Mi Push reaches a phone only
/// through its region's host), and the channels its service and marketing notifications go in.
struct XiaomiRoute: TokenRoute {
    static let name = "xiaomi"
    static let displayName = "Xiaomi Mi Push"
    static let scopes: [ConfigurationScope] = [.xiaomi]
    static let tokenKind = "xiaomi_regid"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    /// The app's row of `herald.app_xiaomi`.
    struct Setup: Equatable, Sendable, Decodable {
        var appSecretFile: String
        var packageName: String
        var region: MiPushClient.Region
        var serviceChannelID: String?
        var marketingChannelID: String?

        enum CodingKeys: String, CodingKey {
            case appSecretFile = "app_secret_file"
            case packageName = "package_name"
            case region
            case serviceChannelID = "service_channel_id"
            case marketingChannelID = "marketing_channel_id"
        }
    }

    let app: String
    let setup: Setup
    let client: MiPushClient
    /// The app's secret, as every daemon knows whether Mi Push accepted it: a regId of another
    /// app is answered as a dead one (20301), so that answer disables a phone only once the
    /// secret is known to be this app's.
    let credentials: AcceptedCredentials
    let accepted: AcceptedCredentials.SeenHere
    /// Until when the app's sends wait, for every daemon: all of them after Mi Push said they
    /// come too fast (10027), a message class's after its daily quota (200001; a private channel,
    /// for service notifications, has none, so a marketing quota holds back only marketing).
    let limits: ProviderPause

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> XiaomiRoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has Xiaomi regIds but no row in herald.app_xiaomi")
        }
        let secret = try ConfigurationProblem.secret(
            inFile: setup.appSecretFile, app: app, what: "the Xiaomi AppSecret file")
        shared.logger.info(
            "loaded the Xiaomi Mi Push setup",
            metadata: ["app": "\(app)", "package": "\(setup.packageName)", "region": "\(setup.region.rawValue)"])
        return XiaomiRoute(
            app: app, setup: setup,
            client: MiPushClient(
                appSecret: secret, region: setup.region, endpoint: shared.configuration.endpoints[name],
                http: shared.http),
            credentials: AcceptedCredentials(app: app, provider: name, account: setup.packageName),
            accepted: shared.shared("xiaomi accepted \(app) \(setup.packageName)") { AcceptedCredentials.SeenHere() },
            limits: shared.shared("xiaomi limits \(app)") { ProviderPause(provider: name, account: "app \(app)") })
    }

    /// Mi Push has no validate-only request: a dry run is built, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        var live: [(OutgoingDelivery, MiPushMessage)] = []
        // What the app's limits hold back now, read once for the batch.
        var held: [OutgoingDelivery.Notification.MessageClass: PushOutcome] = [:]
        for messageClass in [OutgoingDelivery.Notification.MessageClass.service, .marketing] {
            held[messageClass] = await limits.holdsBack(now, part: messageClass.rawValue, context: context)
        }
        for delivery in batch {
            if delivery.notification.dryRun {
                events.append((delivery, .checked(at: now)))
            } else if let outcome = held[delivery.notification.messageClass] {
                events.append((delivery, .sent(outcome, dryRun: false, at: now)))
            } else {
                live.append((delivery, message(for: delivery, builder: builder, now: now)))
            }
        }
        guard !live.isEmpty else { return events }
        let results = await credentials.remembered(
            seen: accepted, context: context, send: { await client.send(live.map(\.1)) },
            isAccepted: { $0.code == MiPushResult.success })
        let at = context.clock.now()
        for ((delivery, _), result) in zip(live, results) {
            let outcome: PushOutcome =
                result.code == MiPushResult.noValidTargets && !accepted.value
                ? AcceptedCredentials.unproven(
                    "Xiaomi Mi Push answered 20301 (\(result.words))",
                    check: "herald.app_xiaomi.app_secret_file and package_name", scope: .xiaomi)
                : result.outcome(untilTomorrow: ChinaTime.untilMidnight(at))
            let part =
                result.code.map(MiPushResult.dailyQuota.contains) == true
                ? delivery.notification.messageClass.rawValue : ""
            await limits.pause(for: outcome, at: at, part: part, context: context)
            events.append((delivery, .sent(outcome, dryRun: false, at: at)))
        }
        return events
    }

    /// A delivery as a Mi Push message. A notification with a title or a body is one the phone
    /// shows (one not given takes the other's text, as Mi Push requires both), in the channel of
    /// its message class (none set: Mi Push's default class, which takes one a day on each
    /// phone); a tap opens the app, or its deep link (a web page, or an intent URI the app
    /// handles). A silent one, or one with only data, is a pass-through message. Either carries
    /// Herald's keys and the producer's data as the payload, which the app reads as from FCM's
    /// data. Its `notify_id`, from the notification's id, makes a repeated send replace the
    /// notification rather than add one. Mi Push keeps a message for a phone that is off at
    /// most a day for a public class, ten for a private one: the TTL is held to that.
    func message(for delivery: OutgoingDelivery, builder: PayloadBuilder, now: Date) -> MiPushMessage {
        let notification = delivery.notification
        let payload = JSONValue.object(builder.androidData(delivery).map { ($0.0, .string($0.1)) })
        var shown: (title: String, description: String, tap: PayloadBuilder.Tap, channelID: String?)?
        if let text = PayloadBuilder.shownText(notification) {
            let channel =
                notification.messageClass == .service ? setup.serviceChannelID : setup.marketingChannelID
            shown = (text.title, text.body, PayloadBuilder.Tap(deepLink: notification.deepLink), channel)
        }
        let longest = notification.messageClass == .service ? 10 * 86_400 : 86_400
        return MiPushMessage(
            regID: delivery.target?.deviceToken ?? "", packageName: setup.packageName, shown: shown,
            payload: String(decoding: payload.encodedBytes, as: UTF8.self),
            notifyID: PayloadBuilder.notifyID(notification.id),
            ttlMilliseconds: min(PayloadBuilder.ttl(delivery, now: now), longest) * 1000,
            receipt: MiPushReceipts.callback(for: delivery, builder: builder))
    }
}
