import Synchronization

/// When a worker loop last came round. The loop beats before each claim (and so at least
/// once per poll interval when idle); a loop stuck in a batch stops beating, which the
/// systemd watchdog notices.
public final class Heartbeat: Sendable {
    private let last = Mutex(ContinuousClock.now)

    public init() {}

    public func beat() { last.withLock { $0 = .now } }

    /// How long ago the loop last beat.
    public var age: Duration { .now - last.withLock { $0 } }
}
