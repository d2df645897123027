import Foundation
import HeraldCore
import HeraldQueue
import Synchronization

/// The outcomes of a dispatch loop's small batches, held for a moment and recorded together
/// (``DispatchWorker/recordOutcomes(_:of:problems:leaseEnds:now:)``).
///
/// At a trickle each send is a batch of its own (a delivery leased at birth), and recording each
/// alone cost the database a transaction per notification: a statement's start over every
/// partition of deliveries, and a commit. Held for `window`, the outcomes of the sends answered
/// meanwhile are recorded in one statement. The notification is not slowed: its provider has
/// answered. Its delivery stays leased until it is recorded, as while it was sent, so a crash
/// meanwhile sends it again when the lease ends, as it would a send in flight.
final class RecordGatherer: Sendable {
    /// A batch's outcomes, as ``DispatchWorker/record(_:dead:problems:at:)`` takes them.
    struct Batch: Sendable {
        var outcomes: [DispatchWorker.SendOutcome]
        var dead: DispatchWorker.DeadTokens
        var problems: [DispatchWorker.ProblemKey: String?]
        /// When the earliest lease among them ends: recording stops retrying then.
        var leaseEnds: ContinuousClock.Instant
        var at: Date
    }

    enum Held {
        /// The first held: the caller records what is held once `window` has passed (`timer`).
        case first
        /// Enough to fill a record, or the loop is stopping: the caller records what is held now.
        case full
        case held
    }

    /// How long the first outcome held waits for others.
    let window: Duration
    /// A record this large gains nothing from waiting: a batch of this many outcomes is
    /// recorded at once, and so are the held ones once they are this many.
    static let full = 64
    /// Ends the window.
    let timer = LazyTimer()
    private let held = Mutex<(batches: [Batch], outcomes: Int, closed: Bool)>(([], 0, false))

    init(window: Duration) { self.window = window }

    func hold(_ batch: Batch) -> Held {
        held.withLock { held in
            held.batches.append(batch)
            held.outcomes += batch.outcomes.count
            if held.outcomes >= Self.full || held.closed { return .full }
            return held.batches.count == 1 ? .first : .held
        }
    }

    /// The loop is stopping: nothing is held from now on.
    func close() { held.withLock { $0.closed = true } }

    /// Everything held, as one batch; nil when nothing is. A configuration's later word on a
    /// problem wins, as it would recorded in turn.
    func take() -> Batch? {
        let batches = held.withLock { held in
            defer { (held.batches, held.outcomes) = ([], 0) }
            return held.batches
        }
        guard var merged = batches.first else { return nil }
        for batch in batches.dropFirst() {
            merged.outcomes += batch.outcomes
            merged.dead.devices += batch.dead.devices
            merged.dead.activityTokens += batch.dead.activityTokens
            merged.dead.pushTypeTokens += batch.dead.pushTypeTokens
            merged.problems.merge(batch.problems) { _, later in later }
            merged.leaseEnds = min(merged.leaseEnds, batch.leaseEnds)
            merged.at = max(merged.at, batch.at)
        }
        return merged
    }
}
