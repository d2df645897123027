import Foundation
import HeraldCore
import HeraldPushKit
import Synchronization

/// One provider's way of sending an app's deliveries, in one place: how it is made from the
/// app's setup (and made again when that changes), how a delivery becomes its request, how
/// the requests are sent, and what their answers mean for each delivery. Every provider has the
/// same shape: a client for its requests, its messages and its typed answers, which knows no
/// database (a module of its own when more than dispatch uses it: `HeraldFCM`, `HeraldAPNs`,
/// `HeraldWebPush`, which UnifiedPush's distributors speak too, and `HeraldPushKit` for Huawei's
/// HMS Core and HarmonyOS; else a file of its route's folder, as the phone makers' are), and a
/// folder here for its route, which adds what Herald keeps: FCM's quota, dry runs, the checks its
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
        XiaomiRoute.self, HonorRoute.self, OPPORoute.self, VivoRoute.self,
    ]

    static func byName(_ providers: [any ProviderRoute.Type]) -> [String: any ProviderRoute.Type] {
        Dictionary(uniqueKeysWithValues: providers.map { ($0.name, $0) })
    }
}

/// The providers that post receipts, as the endpoint reads them: a reader of each here, beside
/// the provider's client.
public enum ProviderReceipts {
    public static let readers: [any ReceiptReader] = [
        PushKitReceipts.android, PushKitReceipts.harmony, MiPushReceipts(),
    ]
}

/// Until when a provider asked what an app sends to wait (Huawei's traffic control, Xiaomi's
/// rate and daily quota), for every daemon (`herald.provider_pauses`): a daemon that meets the
/// limit keeps it there, and the others read it before they send, at most once a second each,
/// so that the fleet waits together rather than being refused in turn. Whose sends it holds
/// back is the provider's choice (`account`), and a pause may hold back only a part of them
/// (a message class, when the limit is that class's); the part "" is all of them. An operator
/// lifts one by deleting its row. If the database cannot say, the pause is this daemon's alone.
final class ProviderPause: Sendable {
    let provider: String
    let account: String
    /// The pauses known, when they were last read, and the parts this daemon paused that no read
    /// has returned yet (a read that began before their rows were written misses them).
    private typealias Known = (parts: [String: (until: Date, reason: String)], readAt: Date?, unconfirmed: Set<String>)
    private let state = Mutex<Known>(([:], nil, []))

    static let rereadAfter: TimeInterval = 1
    /// The longest a pause lasts: a day, as a daily quota does, so one answer that asks for more
    /// (a Retry-After of weeks) cannot stop an app's sends for longer.
    static let longest: TimeInterval = 86_400

    init(provider: String, account: String) {
        self.provider = provider
        self.account = account
    }

    enum SQL {
        static let read = """
            SELECT part, paused_until, reason FROM herald.provider_pauses WHERE provider = $1 AND account = $2
            """
        /// A pause of part $3 of provider $1's account $2 until $4, for $5, met at $6: a later end
        /// wins.
        static let keep = """
            INSERT INTO herald.provider_pauses AS p (provider, account, part, paused_until, reason, paused_at)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (provider, account, part) DO UPDATE
            SET paused_until = excluded.paused_until, reason = excluded.reason, paused_at = excluded.paused_at
            WHERE p.paused_until < excluded.paused_until
            """
    }

    /// What becomes of a send of `part` at `now` while a pause holds it back (its own or one of
    /// all): it waits for the pause's end, not an attempt; nil when none does. As this daemon
    /// knows the pauses, read again from the fleet's when it last read more than a second ago.
    func holdsBack(_ now: Date, part: String = "", context: WorkerContext) async -> PushOutcome? {
        // The database keeps an end to the microsecond, which may round it up a little: one that
        // ends within a millisecond is over.
        let over = now.addingTimeInterval(0.001)
        func known(_ parts: [String: (until: Date, reason: String)]) -> (until: Date, reason: String)? {
            [parts[""], part.isEmpty ? nil : parts[part]].compactMap { $0 }.filter { $0.until > over }
                .max { $0.until < $1.until }
        }
        let due = state.withLock { state in
            state.readAt.map { now.timeIntervalSince($0) >= Self.rereadAfter || now < $0 } ?? true
        }
        if due {
            do {
                let rows = try await context.connection.query(SQL.read, [provider, account])
                let read = try rows.map {
                    (
                        try $0.decode(0, as: String.self), try $0.decode(1, as: Date.self),
                        try $0.decode(2, as: String.self)
                    )
                }
                // The fleet's rows are the truth (a pause an operator lifted, deleted, ends here
                // too), but for one of this daemon's that they do not hold yet.
                state.withLock { state in
                    var parts = Dictionary(read.map { ($0.0, (until: $0.1, reason: $0.2)) }) { $1 }
                    for part in state.unconfirmed {
                        if let mine = state.parts[part], mine.until > over,
                            mine.until > parts[part]?.until ?? .distantPast
                        {
                            parts[part] = mine
                        } else {
                            state.unconfirmed.remove(part)
                        }
                    }
                    state.readAt = now
                    state.parts = parts
                }
            } catch {
                state.withLock { $0.readAt = now }
                context.logger.warning(
                    "could not read whether a provider paused the app's sends",
                    metadata: ["provider": "\(provider)", "account": "\(account)", "error": "\(error)"])
            }
        }
        return state.withLock { known($0.parts) }.map { Self.heldBack(until: $0.until, after: $0.reason, now: now) }
    }

    /// A send held back until `until` after `reason`: it waits, not an attempt.
    static func heldBack(until: Date, after reason: String, now: Date) -> PushOutcome {
        .overQuota(after: .seconds(until.timeIntervalSince(now)), reason: "held back until \(until) after \(reason)")
    }

    /// Holds `part` back for as long as `outcome`, met at `at`, asks when it is a provider's limit
    /// (`overQuota`), for every daemon.
    func pause(for outcome: PushOutcome, at: Date, part: String = "", context: WorkerContext) async {
        guard case .overQuota(let after, let reason) = outcome else { return }
        await pause(until: at.addingTimeInterval(after.seconds), reason: reason, part: part, context: context)
    }

    /// Holds `part` back until `date`, a day from now at most (a later end than the one known
    /// wins), for every daemon.
    private func pause(until date: Date, reason: String, part: String, context: WorkerContext) async {
        let date = min(date, context.clock.now().addingTimeInterval(Self.longest))
        let later = state.withLock { state in
            guard date > state.parts[part]?.until ?? .distantPast else { return false }
            state.parts[part] = (date, reason)
            state.unconfirmed.insert(part)
            return true
        }
        guard later else { return }
        do {
            try await context.connection.query(
                SQL.keep, [provider, account, part, date, String(reason.prefix(500)), context.clock.now()])
        } catch {
            context.logger.warning(
                "could not keep a provider's pause for the other daemons",
                metadata: ["provider": "\(provider)", "account": "\(account)", "error": "\(error)"])
        }
    }
}
