import Foundation

/// The time, as the queue sees it. Injected so that tests of backoff, leases and the
/// 30-minute wake-up rule move time forward instead of sleeping.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The real time of this host.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
