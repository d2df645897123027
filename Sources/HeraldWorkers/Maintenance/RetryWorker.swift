import Foundation
import HeraldCore
import HeraldQueue
import Logging

/// What follows a failed or abandoned attempt, in one place.
///
/// As a worker (`retry` in `HERALD_WORKERS`), every `HERALD_RESCUE_INTERVAL` it runs three
/// passes, each a service of its own file:
/// - ``JobLeaseRescue`` returns `herald.jobs` rows whose lease ran out (their process died or
///   hung) to the queue, with the attempt counted, or dead when it was the last one, and wakes
///   their workers;
/// - ``HopelessRetries`` ends deliveries waiting for a retry that can no longer be sent:
///   `expired` once their notification's expiry passes, `cancelled` once their device is
///   disabled (a dead token found by another delivery), instead of leaving them queued until
///   their next claim;
/// - ``IdleConfigurationProblems`` clears an app's configuration problem that nothing waits on
///   any more, so `herald.app_problems` and `herald status` stop reporting it.
///
/// What becomes of a delivery after each attempt (back off and try again, wait without
/// spending an attempt, give up and list it as dead) is ``DeliveryLife``'s, which dispatch
/// asks as it records. Deliveries whose lease ran out need no rescue pass: they are due again
/// when the lease ends, and the next claim takes them over.
/// Dead items stay queryable in `herald.dead_jobs` until `herald.redrive` queues them again.
/// Retention is not its: the ``Pruner``, which every daemon starts, keeps the tables to it.
public struct RetryWorker: BatchWorker {
    public let kind = WorkerKind.retry.rawValue
    let context: WorkerContext

    /// How often a pass runs (`HERALD_RESCUE_INTERVAL`). Default 5 s.
    public static let defaultInterval: Duration = .seconds(5)

    let interval: Duration

    public init(context: WorkerContext, interval: Duration = Self.defaultInterval) {
        self.context = context
        self.interval = interval
    }

    public var pollInterval: Duration? { interval }

    /// One round of the three passes. Returns 0, so the runner waits `pollInterval` (or a NOTIFY
    /// for `retry`) before the next.
    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        try await JobLeaseRescue(context: context).pass(isStopping: isStopping)
        try await HopelessRetries(context: context).pass(isStopping: isStopping)
        try await IdleConfigurationProblems(context: context).pass()
        return 0
    }
}
