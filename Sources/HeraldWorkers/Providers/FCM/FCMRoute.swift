import Foundation
import HeraldCore
import HeraldFCM

/// What the daemon's configuration sets for FCM, for every app (``Senders/Configuration/set(_:)``).
public struct FCMSettings: Sendable {
    /// `GOOGLE_APPLICATION_CREDENTIALS`: the service-account file of an app that names none.
    public var defaultCredentialsFile: String?
    /// Each FCM project's sends a second, for the whole fleet.
    public var ratePerSecond: Double = FCMQuota.defaultRate

    public init(defaultCredentialsFile: String? = nil, ratePerSecond: Double = FCMQuota.defaultRate) {
        self.defaultCredentialsFile = defaultCredentialsFile
        self.ratePerSecond = ratePerSecond
    }
}

/// An app's sends through FCM HTTP v1: Android and topic sends (route `fcm`), and iOS devices
/// with FCM tokens (`fcm_apns`, which also need the app's APNs setup in Firebase). Made from
/// the app's project and service-account file (or `GOOGLE_APPLICATION_CREDENTIALS`); the
/// project's quota is shared by every app that sends through it, in every daemon (``FCMQuota``).
struct FCMRoute: ProviderRoute {
    static let name = "fcm"
    static let displayName = "FCM"
    static let scopes: [ConfigurationScope] = [.fcm, .fcmAPNs]
    static let payloadKinds = OutgoingDelivery.PayloadKind.applePush.union([.androidData, .androidWakeup, .topic])

    /// The app's row of `herald.app_fcm`.
    struct Setup: Equatable, Sendable, Decodable {
        var project: String
        /// The service-account file; nil: `GOOGLE_APPLICATION_CREDENTIALS`.
        var credentialsFile: String?

        enum CodingKeys: String, CodingKey {
            case project = "project_id"
            case credentialsFile = "credentials_file"
        }
    }

    let client: FCMClient
    let quota: FCMQuota

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> FCMRoute {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has no row in herald.app_fcm (its Firebase project)")
        }
        let settings = shared.configuration.settings(FCMSettings.self) ?? FCMSettings()
        guard let path = setup.credentialsFile ?? settings.defaultCredentialsFile else {
            throw ConfigurationProblem(
                "app \(app) has no credentials_file in herald.app_fcm and GOOGLE_APPLICATION_CREDENTIALS is not set")
        }
        let account: ServiceAccount
        do {
            account = try ServiceAccount.load(file: path)
        } catch {
            throw ConfigurationProblem("app \(app): \(error)")
        }
        let client = FCMClient(
            projectID: setup.project,
            tokens: AccessTokenSource(account: account, http: shared.http, logger: shared.logger), http: shared.http,
            configuration: .init(endpoint: shared.configuration.endpoints[name] ?? FCMClient.defaultEndpoint))
        shared.logger.info(
            "loaded FCM credentials",
            metadata: ["app": "\(app)", "project": "\(setup.project)", "account": "\(account.clientEmail)"])
        let quota = shared.shared("fcm quota \(setup.project)") {
            FCMQuota(
                project: setup.project, perSecond: settings.ratePerSecond,
                connection: shared.quotaConnection, logger: shared.logger, clock: shared.clock)
        }
        return FCMRoute(client: client, quota: quota)
    }

    /// A dry run is FCM's `validate_only`: checked by FCM, not sent. Sends go out as the
    /// project's quota grants them, each grant's at once. A 429 for the project's quota pauses
    /// it in every daemon as soon as it comes; while it is paused, the deliveries not yet sent
    /// wait with it (postponed, no attempt).
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        for dryRun in [false, true] {
            var waiting = batch.filter { $0.notification.dryRun == dryRun }[...]
            await withTaskGroup(of: [(OutgoingDelivery, DeliveryLife.Event)].self) { group in
                while !waiting.isEmpty {
                    switch await quota.take(upTo: waiting.count) {
                    case .send(let count):
                        let part = Array(waiting.prefix(count))
                        waiting = waiting.dropFirst(count)
                        if waiting.isEmpty {
                            // The last grant (usually the only one) is sent by this task: a child
                            // task for it would cost a hand-off and back.
                            events += await sendPart(part, dryRun: dryRun, builder: builder, now: now, context: context)
                        } else {
                            // The child task only calls a method: see ChannelWorker.handle (#40).
                            group.addTask {
                                await sendPart(part, dryRun: dryRun, builder: builder, now: now, context: context)
                            }
                        }
                    case .paused(let wait):
                        events += waiting.map { ($0, .crowdedOut(wait: wait)) }
                        waiting = []
                    }
                }
                for await part in group { events += part }
            }
        }
        return events
    }

    /// A registration token, an installation id or a topic.
    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        switch target {
        case .registrationToken, .installationID, .topic: true
        case .apnsDeviceToken, .subscription, .channel, .token: false
        }
    }

    /// Sends one grant's deliveries; a refusal for the project's quota pauses it at once.
    func sendPart(
        _ part: [OutgoingDelivery], dryRun: Bool, builder: PayloadBuilder, now: Date, context: WorkerContext
    ) async -> [(OutgoingDelivery, DeliveryLife.Event)] {
        let outcomes = await client.send(part.map { builder.fcmMessage(for: $0, now: now) }, validateOnly: dryRun)
        let at = context.clock.now()
        let refusal = outcomes.lazy.compactMap { outcome -> (Duration, String)? in
            if case .overQuota(let after, let reason) = outcome { (after, reason) } else { nil }
        }.first
        if let (after, reason) = refusal { await quota.overQuota(for: after, reason: reason) }
        return zip(part, outcomes).map { ($0, .sent($1, dryRun: dryRun, at: at)) }
    }
}

extension PayloadBuilder {
    /// The FCM v1 message for a delivery, by its payload kind (see ``PayloadBuilder``): the Apple
    /// push in FCM's `apns` block, a topic's, or an Android data message.
    public func fcmMessage(for delivery: OutgoingDelivery, now: Date) -> FCMMessage {
        let notification = delivery.notification
        let ttl = Self.ttl(delivery, now: now)
        if OutgoingDelivery.PayloadKind.applePush.contains(delivery.payloadKind) {
            return iosThroughFCM(delivery, now: now)
        }
        guard delivery.payloadKind == .topic else { return android(delivery, ttl: ttl) }
        return FCMMessage(
            target: fcmTarget(delivery),
            data: merged(notification.data, heraldKeys(delivery)),
            notification: notification.silent
                ? nil : .init(title: notification.title, body: notification.body, image: notification.imageURL),
            android: .init(
                priority: notification.priority == "normal" ? .normal : .high, ttl: .seconds(ttl),
                collapseKey: notification.collapseKey, directBootOK: notification.android.directBootOK,
                notification: notification.android.proxy.map { .object([("proxy", .string($0.uppercased()))]) }))
    }

    /// A data-only message, which FCM never collapses while the device is offline; the app shows
    /// it itself (``PayloadBuilder/androidData(_:)``).
    func android(_ delivery: OutgoingDelivery, ttl: Int) -> FCMMessage {
        let notification = delivery.notification
        return FCMMessage(
            target: fcmTarget(delivery), data: androidData(delivery),
            android: .init(
                priority: notification.priority == "normal" ? .normal : .high, ttl: .seconds(ttl),
                collapseKey: notification.collapseKey, directBootOK: notification.android.directBootOK))
    }

    /// An iOS message through FCM: the same push as straight to APNs, in FCM's `apns` block.
    func iosThroughFCM(_ delivery: OutgoingDelivery, now: Date) -> FCMMessage {
        let push = applePush(delivery, now: now)
        var headers = [
            ("apns-push-type", push.pushType.rawValue), ("apns-priority", String(push.priority)),
            ("apns-expiration", String(Int(push.expiration.timeIntervalSince1970))),
        ]
        if let collapseID = push.collapseID { headers.append(("apns-collapse-id", collapseID)) }
        return FCMMessage(
            target: fcmTarget(delivery),
            apns: .init(headers: headers, payload: push.payload, liveActivityToken: push.activityToken))
    }

    /// What FCM sends to: a registration token, an installation id or a topic.
    func fcmTarget(_ delivery: OutgoingDelivery) -> FCMMessage.Target {
        switch delivery.target {
        case .installationID(let id): .fid(id)
        case .topic(let topic): .topic(topic)
        case .registrationToken(let token): .token(token)
        // Never sent (FCMRoute.accepts).
        case .apnsDeviceToken, .subscription, .channel, .token, nil: .token(delivery.target?.deviceToken ?? "")
        }
    }
}
