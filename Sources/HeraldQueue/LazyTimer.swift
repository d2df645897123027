import HeraldCore
import Synchronization

/// Calls a handler no later than the earliest deadline asked of it, with at most one sleeping
/// task, armed again only for a deadline earlier than the one it sleeps to.
///
/// For deadlines that move later at every step (a loop's poll timeout, set again at each wait;
/// a lease's renewal, due later with each send): a `Task.sleep` per step cost a task, and the
/// dispatch manager's wake-ups to arm and cancel its timer, several times a notification. Here
/// a later deadline costs a lock: the timer wakes at the earlier one, and its handler says
/// when it is needed next.
public final class LazyTimer: Sendable {
    /// Called when the armed time comes; does what is due and returns the next deadline it
    /// needs, or nil for none.
    public typealias Handler = @Sendable () -> ContinuousClock.Instant?

    private struct State {
        /// The time the running task sleeps to; nil while none sleeps (or its handler runs).
        var armedFor: ContinuousClock.Instant?
        /// Counts the tasks started: only the latest acts.
        var generation = 0
        var task: Task<Void, Never>?
        var handler: Handler?
    }
    private let state = Mutex(State())
    /// The clock its deadlines are read on and slept to.
    public let clock: any MonotonicClock

    public init(clock: any MonotonicClock = ContinuousClock()) { self.clock = clock }

    deinit { state.withLock { $0.task?.cancel() } }

    /// Makes sure `handler` is called no later than `deadline` (it replaces the one given before).
    public func ensure(by deadline: ContinuousClock.Instant, _ handler: @escaping Handler) {
        state.withLock { state in
            state.handler = handler
            if let armed = state.armedFor, armed <= deadline { return }
            state.task?.cancel()
            state.generation += 1
            state.armedFor = deadline
            let generation = state.generation
            state.task = Task { [weak self, clock] in
                var wake = deadline
                while true {
                    do {
                        try await clock.sleep(until: wake)
                    } catch {
                        return  // replaced by a timer for an earlier deadline
                    }
                    guard let self, let next = self.fire(generation: generation) else { return }
                    wake = next
                }
            }
        }
    }

    /// Calls the handler for the task of `generation`; returns when that task wakes next, or
    /// nil when it ends.
    private func fire(generation: Int) -> ContinuousClock.Instant? {
        let handler = state.withLock { state -> Handler? in
            guard state.generation == generation else { return nil }
            // From now on a new deadline arms a task of its own: the handler may miss it.
            state.armedFor = nil
            return state.handler
        }
        guard let handler, let next = handler() else { return nil }
        let sleepsOn = state.withLock { state -> Bool in
            guard state.generation == generation, state.armedFor == nil else { return false }
            state.armedFor = next
            return true
        }
        if sleepsOn { return next }
        // Another task was armed meanwhile: it takes this deadline too if it is earlier.
        state.withLock { $0.handler }.map { ensure(by: next, $0) }
        return nil
    }
}
