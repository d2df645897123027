import Foundation
import Synchronization

/// Rows a worker found locked by another session, left alone for a while so that its next
/// batches go on without them (``StatementBounds``): a notification whose ingest alone gave up
/// waiting for a lock is not picked again until ``wait`` has passed, then tried again. Shared by
/// a daemon's loops of one worker; another daemon learns the same for itself.
public final class LockedRows: Sendable {
    /// How long a row found locked is left before it is tried again.
    public static let wait: Duration = .seconds(5)
    private let leftUntil = Mutex<[Int64: Date]>([:])

    public init() {}

    /// Leaves `id` alone until `wait` after `now`.
    public func leave(_ id: Int64, now: Date) {
        let until = now.addingTimeInterval(Double(Self.wait.components.seconds))
        leftUntil.withLock { $0[id] = until }
    }

    /// The rows still left alone at `now`, in id order; those whose wait has passed are forgotten.
    public func left(at now: Date) -> [Int64] {
        leftUntil.withLock { rows in
            rows = rows.filter { $0.value > now }
            return rows.keys.sorted()
        }
    }
}
