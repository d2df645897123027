import Foundation
import HeraldCore
import HeraldCrypto
import HeraldWebPush

extension OutgoingDelivery.PayloadKind {
    /// A notification to a browser: a JSON document its service worker shows
    /// (``PayloadBuilder/webPushMessage(for:now:)``).
    static let web = Self(rawValue: "web")
}

/// An app's browsers on one push service (route `web`, one per push service origin): made from
/// the app's VAPID key and contact, and the hosts its browsers' subscriptions may name.
struct WebPushRoute: ProviderRoute {
    static let name = "webpush"
    static let displayName = "Web Push"
    static let scopes: [ConfigurationScope] = [.web]
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.web]

    /// A browser's subscription.
    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        if case .subscription(OutgoingDelivery.TokenKind.webSubscription.rawValue, _, _, _) = target {
            true
        } else {
            false
        }
    }

    /// The app's row of `herald.app_webpush_settings` (or of another Web Push subscriber's
    /// settings, such as `herald.app_unifiedpush`).
    struct Setup: Equatable, Sendable, Decodable {
        var keyFile: String?
        var subject: String?
        /// The push service hosts its browsers may name (its own, or Herald's default).
        var hosts: [String]
        var privateAddresses: Bool

        enum CodingKeys: String, CodingKey {
            case keyFile = "vapid_key_file"
            case subject = "vapid_subject"
            case hosts
            case privateAddresses = "private_addresses"
        }
    }

    let client: WebPushClient

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> WebPushRoute
    {
        guard let setup, setup.keyFile != nil, setup.subject != nil else {
            throw ConfigurationProblem(
                "app \(app) sends to browsers but has no VAPID key: set vapid_key_file and vapid_subject in"
                    + " herald.app_webpush (herald vapid-key makes a key)")
        }
        return WebPushRoute(
            client: try client(
                app: app, setup: setup, settings: "herald.app_webpush", scope: .web, refusalsCountPer: .subscription,
                shared: shared))
    }

    /// A Web Push client with the app's VAPID key, to the hosts its setup (the app's row of
    /// `settings`) allows; what its answers find failing is the configuration `scope`.
    static func client(
        app: String, setup: Setup, settings: String, scope: ConfigurationScope,
        refusalsCountPer: WebPushClient.RefusalWitness, shared: isolated Senders
    ) throws(ConfigurationProblem) -> WebPushClient {
        do {
            let key = try VAPIDKey.load(file: setup.keyFile ?? "", subject: setup.subject ?? "")
            shared.logger.info(
                "loaded the VAPID key",
                metadata: ["app": "\(app)", "scope": "\(scope.rawValue)", "public_key": "\(key.publicKey)"])
            return WebPushClient(
                authorizations: VAPIDAuthorizations(key: key), http: shared.http,
                policy: WebPushEndpointPolicy(
                    hosts: setup.hosts, privateAddresses: setup.privateAddresses, settings: settings),
                scope: scope, refusalsCountPer: refusalsCountPer)
        } catch {
            throw ConfigurationProblem("app \(app): \(error)")
        }
    }

    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        await Self.send(batch, through: client, now: now, context: context) {
            try builder.webPushMessage(for: $0, now: now)
        }
    }

    /// Sends each delivery's Web Push message (made by `message`) through `client`: a browser's,
    /// or any other Web Push subscriber's. A dry run is built and encrypted, not sent: Web Push
    /// has no validate-only request. A subscription no message can be sent to ends its delivery
    /// `token_invalid` (the device's fault); a document too large for Web Push ends it `failed`.
    static func send(
        _ batch: [OutgoingDelivery], through client: WebPushClient, now: Date, context: WorkerContext,
        message: (OutgoingDelivery) throws -> WebPushMessage
    ) async -> [(OutgoingDelivery, DeliveryLife.Event)] {
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = []
        var messages: [(OutgoingDelivery, WebPushMessage)] = []
        for delivery in batch {
            do {
                let message = try message(delivery)
                if delivery.notification.dryRun {
                    _ = try WebPushEncryption.encrypt(message.payload, for: message.subscription)
                    events.append((delivery, .checked(at: now)))
                } else {
                    messages.append((delivery, message))
                }
            } catch  where error is UnusableSubscription || error is WebPushCipher.InvalidBrowserKey {
                events.append(
                    (delivery, .sent(.tokenInvalid(reason: "\(error)"), dryRun: delivery.notification.dryRun, at: now)))
            } catch {
                events.append(
                    (
                        delivery,
                        .sent(.permanentFailure(reason: "\(error)"), dryRun: delivery.notification.dryRun, at: now)
                    ))
            }
        }
        if !messages.isEmpty {
            let outcomes = await client.send(messages.map(\.1))
            let at = context.clock.now()
            events += zip(messages, outcomes).map { ($0.0, .sent($1, dryRun: false, at: at)) }
        }
        return events
    }
}

extension PayloadBuilder {
    /// The message for a browser. Its document: `title`, `body`, `image_url`, `deep_link`, the
    /// producer's `data` as an object, `tag` (the collapse key, or the notification id, so that
    /// a repeated send replaces the notification rather than adding one), `silent` when set,
    /// and Herald's keys. To Apple's push service, a notification with a title and an http(s)
    /// `deep_link` also carries its Declarative Web Push form (``declarative(_:tag:)``), when it
    /// fits. Throws when the subscription is unusable or the document too large.
    public func webPushMessage(for delivery: OutgoingDelivery, now: Date) throws -> WebPushMessage {
        let notification = delivery.notification
        let tag = notification.collapseKey ?? String(notification.id)
        var document: [(String, JSONValue)] = []
        if let title = notification.title { document.append((PayloadKeys.title, .string(title))) }
        if let body = notification.body { document.append((PayloadKeys.body, .string(body))) }
        if let image = notification.imageURL { document.append((PayloadKeys.imageURL, .string(image))) }
        if let link = notification.deepLink { document.append((PayloadKeys.deepLink, .string(link))) }
        document.append(("data", .object(notification.data.map { ($0.0, .string($0.1)) })))
        document.append(("tag", .string(tag)))
        if notification.silent { document.append(("silent", .bool(true))) }
        document += heraldKeys(delivery).map { ($0.0, .string($0.1)) }
        let subscription = try Self.subscription(of: delivery)
        var payload = JSONValue.object(document).encodedBytes
        if Self.isApplePushService(subscription.endpoint), let declarative = declarative(delivery, tag: tag) {
            let both = JSONValue.object(declarative + document).encodedBytes
            // The classic document alone when both do not fit: every browser can still show it.
            if both.count <= WebPushEncryption.maxPlaintextBytes { payload = both }
        }
        return try Self.webPushMessage(delivery, to: subscription, payload: payload, now: now)
    }

    /// The delivery's Web Push subscription, or why no message can be sent to it.
    static func subscription(of delivery: OutgoingDelivery) throws -> WebPushSubscription {
        guard case .subscription(_, let endpoint, let p256dh, let auth) = delivery.target else {
            throw UnusableSubscription(reason: "the device has no push subscription")
        }
        do {
            return try WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth)
        } catch {
            throw UnusableSubscription(reason: "\(error)")
        }
    }

    /// `payload` to `subscription`, at the delivery's urgency and with the time it has left;
    /// its collapse key, if any, is the message's `Topic` (a newer one replaces it while it waits).
    static func webPushMessage(
        _ delivery: OutgoingDelivery, to subscription: WebPushSubscription, payload: [UInt8], now: Date
    ) throws -> WebPushMessage {
        guard payload.count <= WebPushEncryption.maxPlaintextBytes else {
            throw WebPushError(
                "payload is \(payload.count) bytes, over Web Push's \(WebPushEncryption.maxPlaintextBytes) bytes of plaintext;"
                    + " shorten the title, body or data")
        }
        let notification = delivery.notification
        return WebPushMessage(
            subscription: subscription, payload: payload, ttl: ttl(delivery, now: now),
            urgency: notification.priority == "normal" ? .normal : .high, topic: notification.collapseKey)
    }
}

extension PayloadBuilder {
    /// Whether a subscription's endpoint is Apple's push service (Safari), the one that shows a
    /// Declarative Web Push message itself.
    static func isApplePushService(_ endpoint: String) -> Bool {
        guard let host = URL(string: endpoint)?.host?.lowercased() else { return false }
        return host == "push.apple.com" || host.hasSuffix(".push.apple.com")
    }

    /// Declarative Web Push (WebKit; iOS and iPadOS 18.4 and later): `web_push: 8030` and a
    /// `notification` the browser shows without running a service worker, opening `navigate`
    /// when tapped. It needs a title and a URL to open, so only a notification with a title and
    /// an http(s) `deep_link` has one. `mutable` lets a service worker, where there is one, see the
    /// push (as `event.notification`, without `event.data`) and report it: Herald's keys are in
    /// the notification's `data`. Browsers that do not know the form read the classic members
    /// beside it.
    func declarative(_ delivery: OutgoingDelivery, tag: String) -> [(String, JSONValue)]? {
        let notification = delivery.notification
        guard !notification.silent, let title = notification.title, !title.isEmpty, let link = notification.deepLink,
            link.hasPrefix("https://") || link.hasPrefix("http://"), URL(string: link) != nil
        else { return nil }
        var shown: [(String, JSONValue)] = [("title", .string(title))]
        if let body = notification.body { shown.append(("body", .string(body))) }
        shown.append(("navigate", .string(link)))
        shown.append(("tag", .string(tag)))
        shown.append(("data", .object(merged(notification.data, heraldKeys(delivery)).map { ($0.0, .string($0.1)) })))
        if let badge = notification.badge { shown.append(("app_badge", .int(badge))) }
        shown.append(("mutable", .bool(true)))
        return [("web_push", .int(8030)), ("notification", .object(shown))]
    }
}

/// A browser's subscription that no message can be sent to (registered before the checks that
/// refuse it now): the device's fault, so the device is disabled, never the app's.
struct UnusableSubscription: Error, CustomStringConvertible {
    var reason: String
    var description: String { "unusable subscription: \(reason)" }
}
