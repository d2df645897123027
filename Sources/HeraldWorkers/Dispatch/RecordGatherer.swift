import Foundation
import HeraldCore
import Synchronization

/// The outcomes of a dispatch loop's small batches, held for a moment and recorded together
/// (``DispatchWorker/recordOutcomes(_:of:problems:leaseEnds:now:)``).
///
/// At a trickle each send is a batch of its own (a delivery leased at birth), and recording each
/// alone cost the database a transaction per notification: a statement's start over every
/// partition of deliveries, and a commit. When records follow each other within `window`, a
/// record is held until the window has passed since the one before, and the records that come
/// in meanwhile are written with it, in one statement, in the order they came. One that comes
/// after a quiet window is written at once: it would wait for nothing. The notification is not
/// slowed: its provider has answered. Its delivery stays leased until it is recorded, as while
/// it was sent, so a crash meanwhile sends it again when the lease ends, as it would a send in
/// flight.
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
        /// The caller records what is held now, this one with it: the record before was a
        /// window ago or more, or this one is not small, or these fill a record, or this one
        /// changes what the next claims do (a device or token to disable, a configuration found
        /// failing), or the loop is stopping.
        case recordNow
        /// The first held: the caller records what is held at `until`, a window after the
        /// record before.
        case first(until: ContinuousClock.Instant)
        case held
    }

    /// How long a record is held for the ones that follow it.
    let window: Duration
    /// Only a record of fewer outcomes than this is held: a larger one already shares its
    /// statement among several sends, and waiting would cost it more than it saves.
    static let small = 8
    /// Held outcomes are recorded once they are this many.
    static let full = 64
    private struct State {
        var batches: [Batch] = []
        /// When the last record was taken to be written.
        var lastTaken: ContinuousClock.Instant?
        var closed = false
        /// The waits for a window's end (``windowEnds(at:)``), ended early when the loop stops.
        var windowWaits: Set<Task<Void, Never>> = []
    }
    private let state = Mutex(State())
    private let clock: any MonotonicClock

    init(window: Duration, clock: any MonotonicClock) {
        self.window = window
        self.clock = clock
    }

    func hold(_ batch: Batch) -> Held {
        state.withLock { state in
            state.batches.append(batch)
            let held = state.batches.reduce(0) { $0 + $1.outcomes.count }
            if batch.outcomes.count >= Self.small || held >= Self.full || state.closed
                || !batch.dead.isEmpty || batch.problems.values.contains(where: { $0 != nil })
            {
                return .recordNow
            }
            guard state.batches.count == 1 else { return .held }
            if let last = state.lastTaken, clock.now - last < window {
                return .first(until: last.advanced(by: window))
            }
            return .recordNow
        }
    }

    /// Returns at `until` (a ``Held/first(until:)``), or once the loop stops (``close()``),
    /// which records what is held then.
    func windowEnds(at until: ContinuousClock.Instant) async {
        let wait = Task<Void, Never> { [clock] in try? await clock.sleep(until: until) }
        let closed = state.withLock { state in
            if !state.closed { state.windowWaits.insert(wait) }
            return state.closed
        }
        if closed { wait.cancel() }
        await wait.value
        _ = state.withLock { $0.windowWaits.remove(wait) }
    }

    /// How many waits for a window's end are under way.
    var windowWaitCount: Int { state.withLock { $0.windowWaits.count } }

    /// The loop is stopping: nothing is held from now on, and no wait for a window goes on.
    func close() {
        let waits = state.withLock { state in
            state.closed = true
            return state.windowWaits
        }
        for wait in waits { wait.cancel() }
    }

    /// Everything held, as one batch; nil when nothing is. A configuration's later word on a
    /// problem wins, as it would recorded in turn.
    func take() -> Batch? {
        let batches = state.withLock { state in
            defer { state.batches = [] }
            if !state.batches.isEmpty { state.lastTaken = clock.now }
            return state.batches
        }
        guard var merged = batches.first else { return nil }
        for batch in batches.dropFirst() {
            merged.outcomes += batch.outcomes
            merged.dead.append(batch.dead)
            merged.problems.merge(batch.problems) { _, later in later }
            merged.leaseEnds = min(merged.leaseEnds, batch.leaseEnds)
            merged.at = max(merged.at, batch.at)
        }
        return merged
    }
}
