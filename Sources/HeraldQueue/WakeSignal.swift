import Synchronization

/// Wakes one waiting worker loop early. A signal that arrives while nobody waits is kept,
/// so a wake-up that lands between a claim and the next wait is never lost.
public final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    public init() {}

    /// Wakes the waiter, or the next call to ``wait(timeout:)`` if nobody waits now.
    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns when signalled, when `timeout` passes, or when the task is cancelled.
    public func wait(timeout: Duration) async {
        if state.withLock({ state in
            defer { state.pending = false }; return state.pending
        }) {
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.waitForSignal() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForSignal() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

/// Routes wake-ups to the loops working each job kind: from the `herald_jobs` NOTIFY
/// channel, and from this process's own rescues.
public final class WakeHub: Sendable {
    private let signals = Mutex<[String: [WakeSignal]]>([:])

    public init() {}

    /// A new signal for one loop working `kind`.
    public func register(kind: String) -> WakeSignal {
        let signal = WakeSignal()
        signals.withLock { $0[kind, default: []].append(signal) }
        return signal
    }

    public func wake(kind: String) {
        signals.withLock { $0[kind] ?? [] }.forEach { $0.signal() }
    }

    public func wakeAll() {
        signals.withLock { Array($0.values.joined()) }.forEach { $0.signal() }
    }

    /// The channel the `herald.jobs` insert trigger notifies, with the kind as payload.
    public static let channel = "herald_jobs"
}
