import Foundation
import HeraldCore
import Synchronization

/// One provider's way of sending an app's deliveries, in one place: how it is made from the
/// app's setup (and made again when that changes), how a delivery becomes its request, how
/// the requests are sent, and what their answers mean for each delivery. Every provider has the
/// same shape: a module of its own for its client, its messages and its typed answers
/// (`HeraldFCM`, `HeraldAPNs`, `HeraldWebPush`, which UnifiedPush's distributors speak too, and
/// `HeraldPushKit` for Huawei's HMS Core and HarmonyOS), which knows no database, and a folder
/// here for its route, which adds what Herald keeps: FCM's quota, dry runs, the checks its
/// deliveries need.
///
/// Which deliveries a provider sends is data: its rows of `herald.providers`, `herald.routes`,
/// `herald.route_targets`, `herald.token_kinds` and `herald.config_scopes`, added by its
/// migration (docs/architecture.md, "Adding a provider").
protocol ProviderRoute: Sendable {
    /// Its name in ``Providers``, as `herald.routes.provider` names it.
    static var name: String { get }
    /// Who answers, as reasons name it: "FCM".
    static var displayName: String { get }
    /// The configurations its answers can find failing (rows of `herald.config_scopes`).
    static var scopes: [ConfigurationScope] { get }
    /// Whether it sends to this target. A delivery routed to it with one it does not take waits
    /// (``DispatchWorker/NotSendableHere``): it is never sent as something else.
    static func accepts(_ target: OutgoingDelivery.Target) -> Bool
    /// The payload kinds it builds messages for. A delivery routed to it with another waits, as
    /// one with a target it does not take does.
    static var payloadKinds: Set<OutgoingDelivery.PayloadKind> { get }
    /// The setting that turns it on, for a provider off unless a daemon's setting says so
    /// (UnifiedPush's distributors, servers anyone can run); nil, the default: always on.
    static var turnedOnBy: String? { get }
    /// Whether it sends a Live Activity's pushes to the activity's own token, so that a token it
    /// declares dead is that token, not the device's (APNs); default false.
    static var sendsToActivityTokens: Bool { get }
    /// The app's row of its settings (`herald.providers.settings`), decoded from JSON: a change
    /// makes a new route.
    associatedtype Setup: Equatable & Sendable & Decodable
    /// The route for an app from its settings (nil: the app has no row), or why it cannot be
    /// made (a configuration problem).
    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> Self
    /// Sends one route's deliveries; what happened to each.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
}

extension ProviderRoute {
    static var sendsToActivityTokens: Bool { false }
    static var turnedOnBy: String? { nil }
}

/// A provider whose phones register one kind of plain token (`herald.token_kinds`), and that
/// takes no other target.
protocol TokenRoute: ProviderRoute {
    /// The token kind its phones register.
    static var tokenKind: String { get }
}

extension TokenRoute {
    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        if case .token(tokenKind, _) = target { true } else { false }
    }
}

/// The providers this Herald sends through, by name: a route of `herald.routes` whose provider
/// is not here waits for a daemon that has it.
enum Providers {
    /// Every provider compiled in. A new one is one line here.
    static let compiledIn: [any ProviderRoute.Type] = [
        FCMRoute.self, APNsRoute.self, WebPushRoute.self, HMSRoute.self, HarmonyRoute.self, UnifiedPushRoute.self,
        XiaomiRoute.self,
    ]

    static func byName(_ providers: [any ProviderRoute.Type]) -> [String: any ProviderRoute.Type] {
        Dictionary(uniqueKeysWithValues: providers.map { ($0.name, $0) })
    }
}

/// Until when a provider asked an app's sends to wait (Huawei's traffic control), shared by the
/// routes that send with the same credentials in this daemon: what comes next waits too, rather
/// than being refused in turn.
final class ProviderPause: Sendable {
    private let until = Mutex<Date?>(nil)
    func pausedUntil(_ now: Date) -> Date? { until.withLock { $0.flatMap { $0 > now ? $0 : nil } } }
    func pause(until date: Date) { until.withLock { $0 = max($0 ?? date, date) } }
}
