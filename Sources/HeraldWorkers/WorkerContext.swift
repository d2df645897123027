import HeraldCore
import HeraldPostgres
import HeraldQueue
import Logging

/// What every worker gets from the daemon: its own connection, the clocks, a logger, how it
/// leases and retries what it claims, the providers' routes every sending worker shares, and
/// what the daemon's loops share (births on their way from ingest to dispatch, apps left alone).
/// A worker's own settings are its own (``DispatchWorker/init(context:recordWindow:publicURL:)``,
/// ``ReconcileWorker/Settings``, ``RetryWorker/init(context:interval:)``).
public struct WorkerContext: Sendable {
    public var connection: PostgresConnection
    /// The wall time, for what is stored.
    public var clock: any WallClock
    /// The elapsed time, for what is measured and waited on (leases held, windows, timers).
    public var monotonicClock: any MonotonicClock
    public var logger: Logger
    /// Written into `locked_by`, so that operators see who holds a lease.
    public var workerID: String
    /// How long a claim stays leased before another worker may take it.
    public var lease: Duration
    /// The delay before a failed attempt is tried again.
    public var backoff: Backoff
    public var senders: Senders?
    /// Deliveries this daemon's ingest leased at birth, on their way to its dispatch; nil when
    /// the daemon does not run both (ingest then leases nothing).
    public var births: BirthLeases?
    /// Apps whose rows this daemon's workers found locked by another session, left alone for a
    /// while (``HeldApps``); the daemon shares one among its loops.
    public var heldApps: HeldApps

    public init(
        connection: PostgresConnection, clock: any WallClock, logger: Logger, workerID: String = "herald",
        lease: Duration = JobQueue.defaultLease, backoff: Backoff = Backoff(), senders: Senders? = nil,
        births: BirthLeases? = nil, heldApps: HeldApps = HeldApps(),
        monotonicClock: any MonotonicClock = ContinuousClock()
    ) {
        self.connection = connection
        self.clock = clock
        self.monotonicClock = monotonicClock
        self.logger = logger
        self.workerID = workerID
        self.lease = lease
        self.backoff = backoff
        self.senders = senders
        self.births = births
        self.heldApps = heldApps
    }

    /// `herald.jobs` on this context's connection, for workers whose work is job rows.
    public var jobQueue: JobQueue {
        JobQueue(connection: connection, workerID: workerID, clock: clock, backoff: backoff, lease: lease)
    }
}
