import Foundation
import HeraldCore
import HeraldQueue
import Synchronization

/// A clock that moves only when a test moves it: the wall time (``WallClock``) and the elapsed
/// time (``monotonic``, a ``MonotonicClock``) together. A task that sleeps on it wakes when
/// ``advance(by:)`` passes its deadline; ``sleepers(atLeast:timeout:)`` waits until the code
/// under test sleeps, so that a test advances time only once that code waits for it.
public final class ManualClock: WallClock {
    /// The elapsed time of a ``ManualClock``, for the components that take a ``MonotonicClock``.
    public struct Monotonic: MonotonicClock {
        let clock: ManualClock
        public var now: ContinuousClock.Instant { clock.instant }
        public func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
            try await clock.sleep(until: deadline)
        }
    }

    private struct Sleeper {
        var deadline: ContinuousClock.Instant
        var wake: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var date: Date
        var elapsed: Duration = .zero
        var sleepers: [Int: Sleeper] = [:]
        var nextSleeper = 0
        var watchers: [Int: (count: Int, resume: CheckedContinuation<Void, Never>)] = [:]
        var nextWatcher = 0
    }
    private let state: Mutex<State>
    /// The elapsed time's origin: instants are this plus the time advanced. Far from the real
    /// clock's now, so that an instant of one compared with the other's fails loudly.
    private let origin = ContinuousClock.now.advanced(by: .seconds(1_000_000))

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex(State(date: start))
    }

    public func now() -> Date { state.withLock { $0.date } }

    public var monotonic: Monotonic { Monotonic(clock: self) }

    /// The elapsed time's instant now.
    public var instant: ContinuousClock.Instant { origin.advanced(by: state.withLock { $0.elapsed }) }

    /// Moves both times forward, and wakes the sleepers whose deadline that reaches, earliest
    /// first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.date = state.date.addingTimeInterval(duration.seconds)
            state.elapsed += duration
            let now = origin.advanced(by: state.elapsed)
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.wake.resume() }
    }

    /// Returns once the clock is advanced to `deadline`; throws `CancellationError` when the
    /// task is cancelled first.
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state -> Int in
            defer { state.nextSleeper += 1 }
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (wake: CheckedContinuation<Void, any Error>) in
                let (watchers, sleepsOn) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
                    guard !Task.isCancelled else { return ([], false) }
                    guard deadline > origin.advanced(by: state.elapsed) else { return ([], false) }
                    state.sleepers[id] = Sleeper(deadline: deadline, wake: wake)
                    let count = state.sleepers.count
                    let met = state.watchers.filter { $0.value.count <= count }
                    for id in met.keys { state.watchers[id] = nil }
                    return (met.values.map(\.resume), true)
                }
                if !sleepsOn { Task.isCancelled ? wake.resume(throwing: CancellationError()) : wake.resume() }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.wake.resume(throwing: CancellationError())
        }
    }

    /// How many tasks sleep on this clock now.
    public var sleeping: Int { state.withLock { $0.sleepers.count } }

    /// Returns true once at least `count` tasks sleep on this clock, or false after `timeout`
    /// of real time (the code under test never slept).
    @discardableResult
    public func sleepers(atLeast count: Int, timeout: Duration = .seconds(30)) async -> Bool {
        let id = state.withLock { state -> Int in
            defer { state.nextWatcher += 1 }
            return state.nextWatcher
        }
        let watch = Watch()
        await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
            let sleeping = state.withLock { state -> Bool in
                guard state.sleepers.count < count else { return true }
                state.watchers[id] = (count, resume)
                return false
            }
            if sleeping { return resume.resume() }
            // Armed once the watcher is registered, so that it always finds it.
            watch.giveUp.withLock {
                $0 = Task {
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    guard let watcher = self.state.withLock({ $0.watchers.removeValue(forKey: id) }) else { return }
                    watch.timedOut.store(true, ordering: .sequentiallyConsistent)
                    watcher.resume.resume()
                }
            }
        }
        watch.giveUp.withLock { $0?.cancel() }
        return !watch.timedOut.load(ordering: .sequentiallyConsistent)
    }

    private final class Watch: Sendable {
        let giveUp = Mutex<Task<Void, Never>?>(nil)
        let timedOut = Atomic<Bool>(false)
    }
}
