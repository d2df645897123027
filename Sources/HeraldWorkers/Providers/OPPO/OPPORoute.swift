import Foundation
import HeraldCore

/// An app's OPPO phones (ColorOS), and OnePlus's and realme's, through OPPO Push (route `oppo`),
/// registered with their registration id (`oppo_token`). Made from the app's row of
/// `herald.app_oppo`: its app key and the file holding its master secret, the region its phones
/// are in, the channels its service and marketing notifications go in, and the OPPO category its
/// service notifications are of.
struct OPPORoute: TokenRoute {
    static let name = "oppo"
    static let displayName = "OPPO Push"
    static let scopes: [ConfigurationScope] = [.oppo]
    static let tokenKind = "oppo_token"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    /// The app's row of `herald.app_oppo`.
    struct Setup: Equatable, Sendable, Decodable {
        var appKey: String
        var masterSecretFile: String
        var region: OPPOPushClient.Region
        var serviceChannelID: String?
        var marketingChannelID: String?
        var serviceCategory: String

        enum CodingKeys: String, CodingKey {
            case appKey = "app_key"
            case masterSecretFile = "master_secret_file"
            case region
            case serviceChannelID = "service_channel_id"
            case marketingChannelID = "marketing_channel_id"
            case serviceCategory = "service_category"
        }
    }

    /// OPPO's category for a marketing notification ("内容与营销": MARKETING; NEWS and CONTENT are
    /// its other kinds, none of them a service message's).
    static let marketingCategory = "MARKETING"
    /// How loudly each class is shown: a service notification in the notification bar and on the
    /// lock screen (2), a marketing one in the bar only (1). 16 (a banner, ring and vibration)
    /// is not asked for.
    static let serviceNotifyLevel = 2
    static let marketingNotifyLevel = 1

    let app: String
    let setup: Setup
    let client: OPPOPushClient
    /// The app's key, as every daemon knows whether OPPO Push accepted a send made with it: a
    /// registration id of another app may well be answered as an invalid one (10000), so that
    /// answer disables a phone only once the key is known to be the app's.
    let credentials: AcceptedCredentials
    let accepted: AcceptedCredentials.SeenHere
    /// Until when the app's sends wait, for every daemon: all of them after OPPO said they come
    /// too fast (-2, 13), those through its public channel after its daily limit (33; the private
    /// channel, for service notifications, has none).
    let limits: ProviderPause

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> OPPORoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has OPPO registration ids but no row in herald.app_oppo")
        }
        let secret = try ConfigurationProblem.secret(
            inFile: setup.masterSecretFile, app: app, what: "the OPPO master secret file")
        shared.logger.info(
            "loaded the OPPO Push setup",
            metadata: ["app": "\(app)", "app_key": "\(setup.appKey)", "region": "\(setup.region.rawValue)"])
        return OPPORoute(
            app: app, setup: setup,
            client: OPPOPushClient(
                appKey: setup.appKey, masterSecret: secret, region: setup.region,
                endpoint: shared.configuration.endpoints[name], http: shared.http, logger: shared.logger),
            credentials: AcceptedCredentials(app: app, provider: name, account: "key \(setup.appKey)"),
            accepted: shared.shared("oppo accepted \(app) \(setup.appKey)") { AcceptedCredentials.SeenHere() },
            limits: shared.shared("oppo limits \(app)") { ProviderPause(provider: name, account: "app \(app)") })
    }

    /// The channel a delivery goes through, as OPPO's daily limit counts it: a service
    /// notification through the app's private channel has none; any other is the public
    /// channel's.
    func channel(of delivery: OutgoingDelivery) -> String {
        delivery.notification.messageClass == .service && setup.serviceChannelID != nil ? "private" : "public"
    }

    /// OPPO Push has no validate-only request: a dry run is built, not sent. A silent
    /// notification, or one with neither title nor body, fails: OPPO's API carries no
    /// pass-through message.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        var live: [(OutgoingDelivery, OPPOMessage)] = []
        // What the app's limits hold back now, read once for the batch.
        var held: [String: PushOutcome] = [:]
        for part in ["private", "public"] {
            held[part] = await limits.holdsBack(now, part: part, context: context)
        }
        for delivery in batch {
            guard let message = message(for: delivery, builder: builder, now: now) else {
                let outcome = PushOutcome.permanentFailure(
                    reason: "OPPO Push carries no pass-through (透传) message: a silent notification, or one with"
                        + " neither title nor body, cannot reach an OPPO phone")
                events.append((delivery, .sent(outcome, dryRun: delivery.notification.dryRun, at: now)))
                continue
            }
            if delivery.notification.dryRun {
                events.append((delivery, .checked(at: now)))
            } else if let outcome = held[channel(of: delivery)] {
                events.append((delivery, .sent(outcome, dryRun: false, at: now)))
            } else {
                live.append((delivery, message))
            }
        }
        guard !live.isEmpty else { return events }
        let results = await credentials.remembered(
            seen: accepted, context: context, send: { await client.send(live.map(\.1)) },
            isAccepted: { $0.code == OPPOResult.success })
        let at = context.clock.now()
        for ((delivery, _), result) in zip(live, results) {
            var outcome = result.outcome(untilTomorrow: ChinaTime.untilMidnight(at))
            if case .tokenInvalid = outcome, !accepted.value {
                outcome = AcceptedCredentials.unproven(
                    "OPPO Push answered 10000 (\(result.words))",
                    check: "herald.app_oppo's app_key and master_secret_file", scope: .oppo)
            }
            let part = result.code == OPPOResult.dailyLimit ? channel(of: delivery) : ""
            await limits.pause(for: outcome, at: at, part: part, context: context)
            events.append((delivery, .sent(outcome, dryRun: false, at: at)))
        }
        return events
    }

    /// A delivery as an OPPO Push notification, or nil when OPPO cannot carry it (a silent one,
    /// or one with neither title nor body). One not given takes the other's text, as OPPO
    /// requires both. A service notification goes in the app's private channel, of its service
    /// category, shown on the lock screen too; a marketing one in its marketing channel (none:
    /// OPPO's default public channel), of category MARKETING, in the notification bar only; a
    /// marketing notification never goes as a service one. A tap opens the app, or its deep link
    /// (a web page, or an intent scheme URL the app handles); Herald's keys and the producer's
    /// data are the tap's `action_parameters`. The notification's id is its `notify_id` and, for
    /// the device, its `app_message_id`, so a send repeated after a lost answer is shown once.
    func message(for delivery: OutgoingDelivery, builder: PayloadBuilder, now: Date) -> OPPOMessage? {
        let notification = delivery.notification
        guard let text = PayloadBuilder.shownText(notification) else { return nil }
        let parameters = JSONValue.object(builder.androidData(delivery).map { ($0.0, .string($0.1)) })
        let service = notification.messageClass == .service
        return OPPOMessage(
            regID: delivery.target?.deviceToken ?? "", title: text.title, content: text.body,
            tap: PayloadBuilder.Tap(deepLink: notification.deepLink),
            actionParameters: String(decoding: parameters.encodedBytes, as: UTF8.self),
            channelID: service ? setup.serviceChannelID : setup.marketingChannelID,
            category: service ? setup.serviceCategory : Self.marketingCategory,
            notifyLevel: service ? Self.serviceNotifyLevel : Self.marketingNotifyLevel,
            notifyID: PayloadBuilder.notifyID(notification.id),
            appMessageID: "herald-\(notification.id)-\(delivery.device?.rowID ?? 0)",
            ttl: PayloadBuilder.ttl(delivery, now: now))
    }
}
