import HeraldCore
import Logging

/// One kind of queued work, as a ``WorkerRunner`` drives it: claim up to a limit, work what
/// was claimed, record what became of each item.
///
/// Ingest and dispatch claim rows of their own tables (`herald.notifications`,
/// `herald.deliveries`); every other kind claims `herald.jobs` through a ``JobWorker``.
public protocol BatchWorker: Sendable {
    /// The worker's name in `HERALD_WORKERS`, in metrics, and in the NOTIFY that wakes it.
    var kind: String { get }

    /// Claims up to `limit` items, works them and records their outcomes; returns how many it
    /// claimed, so fewer than `limit` means nothing more was due.
    ///
    /// Throws only when it could not claim (the database is away). Once work is done, its
    /// outcome is recorded even if the database goes away meanwhile: see ``recordWithinLease``.
    /// `isStopping` says whether a graceful shutdown has begun.
    func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int

    /// The longest wait between batches when no NOTIFY arrives, if the worker has its own;
    /// nil: `HERALD_POLL_INTERVAL`.
    var pollInterval: Duration? { get }

    /// Whether a wake-up that comes soon after the last batch waits a moment for more
    /// (``WorkerRunner/Configuration/gather``): for work that arrives a commit at a time.
    var gathersWakeUps: Bool { get }

    /// Waits for work a batch started and left running when it returned (dispatch's sends,
    /// recorded as their answers come in), once the runner has stopped claiming.
    func finish() async
}

extension BatchWorker {
    public var pollInterval: Duration? { nil }
    public var gathersWakeUps: Bool { false }
    public func finish() async {}
}

/// Records a batch's outcomes, trying again while the database is away: the work is done
/// (a notification may be on a phone already), and losing its record would mean doing it
/// again once the lease runs out. It gives up at `deadline`, when the lease taken at the
/// claim runs out, since the items may be someone else's by then; and once a graceful
/// shutdown has begun (`isStopping`), ``shutdownGrace`` after the first failure seen since, so
/// that the process stops within its stop timeout rather than waiting out the lease (the items
/// are then claimed again when their lease ends, as after a crash). Returns whether the record
/// was written.
public func recordWithinLease(
    until deadline: ContinuousClock.Instant, clock: any MonotonicClock = ContinuousClock(), logger: Logger,
    items: Int, isStopping: @Sendable () -> Bool = { false }, _ write: () async throws -> Void
) async -> Bool {
    var delay = RetryDelay()
    var stopBy: ContinuousClock.Instant?
    while true {
        do {
            try await write()
            return true
        } catch {
            if stopBy == nil, isStopping() { stopBy = clock.now.advanced(by: shutdownGrace) }
            let giveUpAt = min(deadline, stopBy ?? deadline)
            guard clock.now < giveUpAt else {
                logger.error(
                    "cannot record a batch; its items will be claimed again when their lease ends",
                    metadata: ["error": "\(error)", "items": "\(items)", "stopping": "\(stopBy != nil)"])
                return false
            }
            logger.warning("recording a batch failed; retrying", metadata: ["error": "\(error)"])
            try? await clock.sleep(for: delay.next())
        }
    }
}

/// How long a worker that is shutting down keeps trying to record a batch: well within
/// systemd's stop timeout (deploy/herald.service), whatever the lease.
public let shutdownGrace: Duration = .seconds(5)

/// A doubling delay for retrying the database after an error: 100 ms up to 5 s.
struct RetryDelay {
    private var current: Duration = .milliseconds(100)
    mutating func next() -> Duration {
        defer { current = min(current * 2, .seconds(5)) }
        return current
    }
    mutating func reset() { current = .milliseconds(100) }
}
