import Foundation
import HeraldCore
import HeraldCrypto
import HeraldWebPush

extension ConfigurationScope {
    /// An app's UnifiedPush VAPID key or subject (`herald.app_unifiedpush`).
    static let unifiedPush: Self = "unifiedpush"
}

/// An app's Android phones that receive through a UnifiedPush distributor (route
/// `unifiedpush`, one per distributor origin, like browsers' push services): registered with
/// the endpoint and keys the connector gave the app (`unifiedpush`), sent as Web Push (RFC 8030,
/// encrypted per RFC 8291, VAPID per RFC 8292) with the app's VAPID key, to the distributors its
/// policy accepts (`herald.app_unifiedpush`).
///
/// A distributor is a server anyone can run: a hostile one fails only its own phones'
/// deliveries, each with its reason. An operator may still turn UnifiedPush off
/// (`HERALD_UNIFIEDPUSH=false`); these deliveries then wait, saying so, for a daemon that has it on.
struct UnifiedPushRoute: ProviderRoute {
    static let name = "unifiedpush"
    static let displayName = "UnifiedPush"
    static let scopes: [ConfigurationScope] = [.unifiedPush]
    static let turnedOnBy: String? = "HERALD_UNIFIEDPUSH"
    /// The token kind its phones register (`herald.token_kinds`).
    static let tokenKind = "unifiedpush"
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        if case .subscription(tokenKind, _, _, _) = target { true } else { false }
    }

    /// The app's row of `herald.app_unifiedpush`: its VAPID key and contact, and the distributor
    /// hosts its phones' endpoints may name (`*`: any public host).
    typealias Setup = WebPushRoute.Setup

    let client: WebPushClient

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem)
        -> UnifiedPushRoute
    {
        guard let setup else {
            throw ConfigurationProblem("app \(app) has UnifiedPush endpoints but no row in herald.app_unifiedpush")
        }
        return UnifiedPushRoute(
            client: try WebPushRoute.client(
                app: app, setup: setup, settings: "herald.app_unifiedpush", scope: .unifiedPush,
                refusalsCountPer: .origin, shared: shared))
    }

    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        await WebPushRoute.send(batch, through: client, now: now, context: context) {
            try builder.unifiedPushMessage(for: $0, now: now)
        }
    }
}

extension PayloadBuilder {
    /// The message for a UnifiedPush distributor: the Android data document
    /// (``PayloadBuilder/androidData(_:)``), the keys an Android app reads from FCM's data
    /// messages, as one JSON object, which the connector decrypts and hands to the app.
    func unifiedPushMessage(for delivery: OutgoingDelivery, now: Date) throws -> WebPushMessage {
        let document = JSONValue.object(androidData(delivery).map { ($0.0, .string($0.1)) })
        return try Self.webPushMessage(
            delivery, to: try Self.subscription(of: delivery), payload: document.encodedBytes, now: now)
    }
}
