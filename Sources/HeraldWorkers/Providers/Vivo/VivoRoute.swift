import Foundation
import HeraldCore

/// An app's vivo phones (OriginOS, Funtouch OS), through vivo Push (route `vivo`), registered with
/// their regId (`vivo_token`). Made from the app's row of `herald.app_vivo`: its push app id and
/// key, the file holding its app secret, the categories its service and marketing notifications
/// go in, and whether it sends only to its test phones.
struct VivoRoute: TokenRoute {
    static let name = "vivo"
    static let displayName = "vivo Push"
    static let scopes: [ConfigurationScope] = [.vivo]
    static let tokenKind = "vivo_token"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    /// The app's row of `herald.app_vivo`.
    struct Setup: Equatable, Sendable, Decodable {
        var vivoAppID: String
        var appKey: String
        var appSecretFile: String
        var serviceCategory: String
        var marketingCategory: String
        var testMode: Bool

        enum CodingKeys: String, CodingKey {
            case vivoAppID = "vivo_app_id"
            case appKey = "app_key"
            case appSecretFile = "app_secret_file"
            case serviceCategory = "service_category"
            case marketingCategory = "marketing_category"
            case testMode = "test_mode"
        }
    }

    let setup: Setup
    let client: VivoPushClient
    /// The app's key and secret, as every daemon knows whether vivo Push accepted them: a regId
    /// of another app may be answered as an invalid one (10302), so that answer disables a phone
    /// only once the app's credentials are known to be its own.
    let credentials: AcceptedCredentials
    let accepted: AcceptedCredentials.SeenHere
    /// Until when the app's sends wait, for every daemon: all of them after vivo said they come
    /// too fast (10072), a message class's after its daily total (10070).
    let limits: ProviderPause

    /// vivo delivers operation (marketing) messages only from 7:00 to 23:00 in China (vivo's
    /// push FAQ, doc 156, as Tencent's and Alibaba's vendor guides repeat it); at night only
    /// system messages go.
    static let marketingHours = (from: 7 * 3600.0, until: 23 * 3600.0)

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> VivoRoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has vivo regIds but no row in herald.app_vivo")
        }
        let secret = try ConfigurationProblem.secret(
            inFile: setup.appSecretFile, app: app, what: "the vivo app secret file")
        shared.logger.info(
            "loaded the vivo Push setup",
            metadata: [
                "app": "\(app)", "vivo_app_id": "\(setup.vivoAppID)", "service_category": "\(setup.serviceCategory)",
                "test_mode": "\(setup.testMode)",
            ])
        let account = "app \(setup.vivoAppID) key \(setup.appKey.prefix(6))…"
        return VivoRoute(
            setup: setup,
            client: VivoPushClient(
                appID: setup.vivoAppID, appKey: setup.appKey, appSecret: secret,
                endpoint: shared.configuration.endpoints[name], http: shared.http, logger: shared.logger),
            credentials: AcceptedCredentials(app: app, provider: name, account: account),
            accepted: shared.shared("vivo accepted \(app) \(account)") { AcceptedCredentials.SeenHere() },
            limits: shared.shared("vivo limits \(app)") { ProviderPause(provider: name, account: "app \(app)") })
    }

    /// How long a marketing notification waits at `now` for vivo's daytime, or nil in it.
    static func untilMarketingHours(_ now: Date) -> Duration? {
        let into = ChinaTime.intoDay(now)
        if into >= marketingHours.from && into < marketingHours.until { return nil }
        let wait = into < marketingHours.from ? marketingHours.from - into : 86_400 - into + marketingHours.from
        return .seconds(wait)
    }

    /// vivo Push has no validate-only request: a dry run is built, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        var live: [(OutgoingDelivery, VivoMessage)] = []
        var held: [OutgoingDelivery.Notification.MessageClass: PushOutcome] = [:]
        for messageClass in [OutgoingDelivery.Notification.MessageClass.service, .marketing] {
            held[messageClass] = await limits.holdsBack(now, part: messageClass.rawValue, context: context)
        }
        if held[.marketing] == nil, let wait = Self.untilMarketingHours(now) {
            held[.marketing] = ProviderPause.heldBack(
                until: now.addingTimeInterval(wait.seconds),
                after: "vivo delivers marketing (operation messages) only 7:00-23:00 in China", now: now)
        }
        for delivery in batch {
            let message = message(for: delivery, builder: builder, now: now)
            if let problem = Self.unsendable(delivery) ?? message.customProblem {
                let failed = PushOutcome.permanentFailure(reason: problem)
                events.append((delivery, .sent(failed, dryRun: delivery.notification.dryRun, at: now)))
            } else if delivery.notification.dryRun {
                events.append((delivery, .checked(at: now)))
            } else if let outcome = held[delivery.notification.messageClass] {
                events.append((delivery, .sent(outcome, dryRun: false, at: now)))
            } else {
                live.append((delivery, message))
            }
        }
        guard !live.isEmpty else { return events }
        let results = await credentials.remembered(
            seen: accepted, context: context, send: { await client.send(live.map(\.1)) },
            isAccepted: { $0.result == VivoResult.success })
        let at = context.clock.now()
        for ((delivery, _), result) in zip(live, results) {
            var outcome = result.outcome(untilTomorrow: ChinaTime.untilMidnight(at))
            if case .tokenInvalid = outcome, !accepted.value {
                outcome = AcceptedCredentials.unproven(
                    "vivo Push answered 10302 (\(result.words))",
                    check: "herald.app_vivo's vivo_app_id, app_key and secret", scope: .vivo)
            }
            if result.result != VivoResult.phoneDailyLimit {
                let part =
                    result.result.map(VivoResult.dailyQuota.contains) == true
                    ? delivery.notification.messageClass.rawValue : ""
                await limits.pause(for: outcome, at: at, part: part, context: context)
            }
            events.append((delivery, .sent(outcome, dryRun: false, at: at)))
        }
        return events
    }

    /// Why vivo Push cannot carry a delivery at all: it shows every message it takes, and has no
    /// pass-through (silent or data-only) message.
    static func unsendable(_ delivery: OutgoingDelivery) -> String? {
        guard PayloadBuilder.shownText(delivery.notification) != nil else {
            return "vivo Push shows every message it takes and has no pass-through message: a silent or"
                + " data-only notification cannot go through it"
        }
        return nil
    }

    /// A delivery as a vivo Push message: its title and content (one not given takes the other's
    /// text, as vivo requires both), its class from its message class (service: a system message
    /// in the app's service category; marketing: an operation message in its marketing
    /// category), its tap opening the app or its deep link, the producer's data and Herald's keys
    /// as `clientCustomMap`, a `requestId` from the delivery's id (so that vivo may take a retried send once: not confirmed),
    /// and a `notifyId` from the notification's id.
    func message(for delivery: OutgoingDelivery, builder: PayloadBuilder, now: Date) -> VivoMessage {
        let notification = delivery.notification
        let text = PayloadBuilder.shownText(notification) ?? ("", "")
        let service = notification.messageClass == .service
        return VivoMessage(
            appID: setup.vivoAppID, regID: delivery.target?.deviceToken ?? "", title: text.title,
            content: text.body, tap: PayloadBuilder.Tap(deepLink: notification.deepLink), service: service,
            category: service ? setup.serviceCategory : setup.marketingCategory,
            custom: builder.merged(notification.data, builder.heraldKeys(delivery)),
            requestID: "herald-\(delivery.deliveryID)", notifyID: PayloadBuilder.notifyID(notification.id),
            ttl: PayloadBuilder.ttl(delivery, now: now), test: setup.testMode)
    }
}
