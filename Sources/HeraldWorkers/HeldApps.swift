import Foundation
import Synchronization

/// Apps some of whose rows another session holds locked (a producer's transaction left open on a
/// device it registered or a delivery it fetched): a worker that met such a lock leaves the app's
/// work alone for a while, so that its next batches, and every other app's work, go on without
/// waiting for that lock again. The first wait is ``firstWait``; each time the lock is met again
/// the wait doubles, up to ``longestWait``, and it starts over once the app's work goes through.
/// Kept per worker kind (ingest leaving an app does not hold back its reports); one is shared by
/// a daemon's loops; another daemon learns the same for itself.
public final class HeldApps: Sendable {
    public static let firstWait: Duration = .seconds(5)
    public static let longestWait: Duration = .seconds(60)

    private struct Held {
        var until: Date
        var wait: Duration
    }
    /// By worker kind, then app.
    private let held = Mutex<[String: [String: Held]]>([:])

    public init() {}

    /// Leaves `app` alone from `now` for `kind`'s next wait; returns that wait.
    @discardableResult
    public func leave(_ app: String, kind: String, now: Date) -> Duration {
        held.withLock { held in
            let wait = held[kind]?[app].map { min($0.wait * 2, Self.longestWait) } ?? Self.firstWait
            held[kind, default: [:]][app] = Held(
                until: now.addingTimeInterval(Double(wait.components.seconds)), wait: wait)
            return wait
        }
    }

    /// `app`'s work of `kind` went through: its next lock starts from the first wait.
    public func release(_ app: String, kind: String) {
        held.withLock { _ = $0[kind]?.removeValue(forKey: app) }
    }

    /// The apps `kind` leaves alone at `now`, in name order (an app whose wait has passed is
    /// tried again, and keeps its wait until its work goes through).
    public func held(kind: String, at now: Date) -> [String] {
        held.withLock { held in (held[kind] ?? [:]).filter { $0.value.until > now }.keys.sorted() }
    }
}
