/// Elapsed time, as Herald measures and waits on it: windows, leases, timers, pauses. Injected
/// (the daemon passes `ContinuousClock()`) so that a test moves it forward instead of sleeping;
/// the wall time Herald stores is ``WallClock``'s.
public protocol MonotonicClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Returns at `deadline`; throws `CancellationError` when the task is cancelled first.
    func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws
}

extension ContinuousClock: MonotonicClock {}

extension MonotonicClock {
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await sleep(until: deadline, tolerance: nil)
    }

    public func sleep(for duration: Duration) async throws {
        try await sleep(until: now.advanced(by: duration), tolerance: nil)
    }
}
