import HeraldCore
import Synchronization

/// Wakes one waiting worker loop early. A signal that arrives while nobody waits is kept,
/// so a wake-up that lands between a claim and the next wait is never lost.
public final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Whether the waiter waits for work, not out an error's pause.
        var waitsForWork = false
        /// Whether it woke its waiting loop, which has not begun its claim yet: that claim
        /// covers any wake-up that comes meanwhile. (A signal kept for a busy loop does not
        /// count: its claim may be a long batch away.)
        var claimDue = false
        /// When the waiter's wait ends unless it is signalled first.
        var deadline: ContinuousClock.Instant?
    }
    private let state = Mutex(State())
    /// Ends waits at their timeout: one timer for the signal's successive waits, since each
    /// wait's deadline is later than the one before (``LazyTimer``).
    private let timer: LazyTimer

    public init(clock: any MonotonicClock = ContinuousClock()) { timer = LazyTimer(clock: clock) }

    /// Wakes the waiter, or the next call to ``wait(timeout:)`` if nobody waits now.
    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            state.deadline = nil
            state.claimDue = true
            return waiter
        }
        waiter?.resume()
    }

    /// Whether a loop waits on this signal now, for work or out a pause.
    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Whether a loop waits for work on this signal now (``wait(timeout:)``).
    var isWaitingForWork: Bool { state.withLock { $0.waiter != nil && $0.waitsForWork } }

    /// Whether its loop was signalled and has not begun its claim yet: that claim covers any
    /// wake-up that comes now, so the ``WakeHub`` wakes nobody else for it.
    var isClaimDue: Bool { state.withLock { $0.claimDue } }

    /// Says that the loop will claim shortly (it gathers first), however it was woken: until
    /// it begins, the ``WakeHub`` wakes nobody else of its kind.
    public func claimComing() {
        state.withLock { $0.claimDue = true }
    }

    /// Says that the loop begins a claim now: what every signal so far announced is committed,
    /// so the claim covers them, and a kept one is dropped.
    public func claiming() {
        state.withLock { state in
            state.claimDue = false
            state.pending = false
        }
    }

    /// Waits for work: returns when signalled, when `timeout` passes, or when the task is
    /// cancelled.
    public func wait(timeout: Duration) async {
        await wait(timeout: timeout, forWork: true)
    }

    /// Waits out an error's delay, as ``wait(timeout:)`` does, but a ``WakeHub`` wakes a loop
    /// that waits for work before this one.
    public func pause(_ delay: Duration) async {
        await wait(timeout: delay, forWork: false)
    }

    private func wait(timeout: Duration, forWork: Bool) async {
        if state.withLock({ state in
            defer { state.pending = false }; return state.pending
        }) {
            return
        }
        let deadline = timer.clock.now.advanced(by: timeout)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    state.waitsForWork = forWork
                    state.deadline = deadline
                    return false
                }
                if resumeNow {
                    continuation.resume()
                } else {
                    timer.ensure(by: deadline) { [weak self] in self?.endWaitIfDue() }
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer {
                    state.waiter = nil
                    state.deadline = nil
                }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Ends the wait whose deadline has come; returns the deadline of one still running.
    private func endWaitIfDue() -> ContinuousClock.Instant? {
        let now = timer.clock.now
        let (ended, next) = state.withLock { state -> (CheckedContinuation<Void, Never>?, ContinuousClock.Instant?) in
            guard let deadline = state.deadline, let waiter = state.waiter else { return (nil, nil) }
            guard deadline <= now else { return (nil, deadline) }
            state.waiter = nil
            state.deadline = nil
            return (waiter, nil)
        }
        ended?.resume()
        return next
    }
}

/// Routes wake-ups to the loops working each job kind: from the `herald_jobs` NOTIFY
/// channel, and from this process's own rescues.
public final class WakeHub: Sendable {
    private let signals = Mutex<[String: [WakeSignal]]>([:])
    /// Each kind's last wake-up, and how long after the one before it came.
    private let wakes = Mutex<[String: (at: ContinuousClock.Instant, interval: Duration?)]>([:])
    /// The elapsed time its loops wait on: their timeouts and pauses.
    public let clock: any MonotonicClock

    public init(clock: any MonotonicClock = ContinuousClock()) { self.clock = clock }

    /// How long the last wake-up for `kind` came after the one before it (nil: fewer than two
    /// so far): short when commits come faster than a claim's gathering lasts.
    public func lastInterval(kind: String) -> Duration? {
        wakes.withLock { $0[kind]?.interval ?? nil }
    }

    /// A new signal for one loop working `kind`.
    public func register(kind: String) -> WakeSignal {
        let signal = WakeSignal(clock: clock)
        signals.withLock { $0[kind, default: []].append(signal) }
        return signal
    }

    /// Wakes one loop working `kind` that waits for work: it claims after this call, so it
    /// finds what was announced, and a loop that finds a backlog brings in another
    /// (``wakeAnother(kind:)``). Waking every waiting loop had all but one of them find nothing,
    /// each claim costing the database a statement (at a steady 1,000 notifications a second,
    /// most claims were empty). When none waits for work, every loop takes the signal, and the
    /// busy ones look again once their batch is done. While a loop woken has yet to claim,
    /// nobody is woken.
    public func wake(kind: String) {
        let now = clock.now
        wakes.withLock { wakes in
            wakes[kind] = (now, wakes[kind].map { now - $0.at })
        }
        let loops = signals.withLock { $0[kind] ?? [] }
        // A loop already woken claims after this wake-up's commit: it covers it, and waking
        // another would have one of the two find nothing (a statement for naught), or split a
        // handful of commits that a loop gathering them would take in one claim.
        if loops.contains(where: \.isClaimDue) { return }
        if let waiting = loops.first(where: \.isWaitingForWork) {
            waiting.signal()
        } else {
            loops.forEach { $0.signal() }
        }
    }

    /// Wakes one more loop working `kind`, if one waits for work: a backlog's share.
    public func wakeAnother(kind: String) {
        signals.withLock { $0[kind] ?? [] }.first(where: \.isWaitingForWork)?.signal()
    }

    public func wakeAll() {
        signals.withLock { Array($0.values.joined()) }.forEach { $0.signal() }
    }

    /// The channel the `herald.jobs` insert trigger notifies, with the kind as payload.
    public static let channel = "herald_jobs"
}
