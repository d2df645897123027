import HeraldCore
import Synchronization

/// Whether a worker loop is stuck: how long it has been in the batch in hand. The loop beats
/// as it starts each batch and says when it goes idle to wait for work, so a loop that waits
/// for a long poll interval is not mistaken for one stuck in a batch, which stops beating and
/// which the systemd watchdog notices.
public final class Heartbeat: Sendable {
    /// When the batch in hand began; nil while the loop waits for work.
    private let busySince: Mutex<ContinuousClock.Instant?>
    private let clock: any MonotonicClock

    public init(clock: any MonotonicClock = ContinuousClock()) {
        self.clock = clock
        busySince = Mutex(clock.now)
    }

    /// The loop starts a batch.
    public func beat() { busySince.withLock { $0 = clock.now } }

    /// The loop waits for work (a NOTIFY, the poll interval, or a retry after an error).
    public func idle() { busySince.withLock { $0 = nil } }

    /// How long the loop has been in its batch; zero while it waits.
    public var age: Duration { busySince.withLock { $0 }.map { clock.now - $0 } ?? .zero }
}
