/// Exponential backoff with full jitter: before retry `n` a job waits a random time between
/// zero and `min(cap, base × 2^(n-1))`, so that failures from one outage spread out instead
/// of retrying in lockstep.
public struct Backoff: Sendable {
    /// The ceiling for the first retry. Default 1 s.
    public var base: Duration
    /// The largest ceiling. Default 1 hour.
    public var cap: Duration
    /// A source of uniform random numbers in `0..<1`; injected by tests.
    public var random: @Sendable () -> Double

    /// Attempts before an item is given up and listed as dead: every delivery's limit, and a
    /// job's unless it names its own (`herald.jobs.max_attempts`).
    public static let maxAttempts = 25

    public static let defaultBase: Duration = .seconds(1)
    public static let defaultCap: Duration = .seconds(3600)

    public init(
        base: Duration = Backoff.defaultBase,
        cap: Duration = Backoff.defaultCap,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.base = base
        self.cap = cap
        self.random = random
    }

    /// The largest delay after `attempts` failed attempts (1 or more).
    public func ceiling(afterAttempts attempts: Int) -> Duration {
        let exponent = min(max(attempts - 1, 0), 62)
        let seconds = base.seconds * Double(sign: .plus, exponent: exponent, significand: 1)
        return .seconds(min(seconds, cap.seconds))
    }

    /// The delay before the next attempt, after `attempts` failed attempts; never shorter
    /// than `atLeast` (a server's `Retry-After`, or a quota's floor).
    public func delay(afterAttempts attempts: Int, atLeast floor: Duration = .zero) -> Duration {
        let jittered = Duration.seconds(ceiling(afterAttempts: attempts).seconds * random())
        return max(jittered, floor)
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    public var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
