import Foundation
import HeraldCore
import HeraldQueue
import Logging

/// What follows a failed or abandoned attempt, in one place.
///
/// As a worker (`retry` in `HERALD_WORKERS`), every `HERALD_RESCUE_INTERVAL` it:
/// - returns `herald.jobs` rows whose lease ran out (their process died or hung) to the queue,
///   with the attempt counted, or dead when it was the last one, and wakes their workers;
/// - ends deliveries waiting for a retry that can no longer be sent: `expired` once their
///   notification's expiry passes, `cancelled` once their device is disabled (a dead token
///   found by another delivery), instead of leaving them queued until their next claim;
/// - clears an app's configuration problem that nothing waits on any more, so
///   `herald.app_problems` and `herald status` stop reporting it.
///
/// What becomes of a delivery after each attempt (back off and try again, wait without
/// spending an attempt, give up and list it as dead) is ``DeliveryLife``'s, which dispatch
/// asks as it records. Deliveries whose lease ran out need no rescue pass: they are due again
/// when the lease ends, and the next claim takes them over.
/// Dead items stay queryable in `herald.dead_jobs` until `herald.redrive` queues them again.
public struct RetryWorker: BatchWorker {
    public let kind = WorkerKind.retry.rawValue
    let context: WorkerContext

    /// How often a pass runs (`HERALD_RESCUE_INTERVAL`). Default 5 s.
    public static let defaultInterval: Duration = .seconds(5)
    /// Rows per statement; a pass repeats until a statement finds fewer.
    static let batchSize = 1000

    public init(context: WorkerContext) { self.context = context }

    public var pollInterval: Duration? { context.retryInterval }

    /// One pass: every expired job lease, then every hopeless wait. Returns 0, so the runner
    /// waits `pollInterval` (or a NOTIFY for `retry`) before the next pass.
    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        try await rescueJobLeases(isStopping: isStopping)
        try await endHopelessRetries(isStopping: isStopping)
        try await clearIdleConfigurationProblems()
        return 0
    }

    func clearIdleConfigurationProblems() async throws {
        let cleared = try await context.connection.query(SQL.clearIdleProblems, [context.clock.now()])[0]
            .decode(0, as: Int.self)
        if cleared > 0 {
            context.logger.info(
                "cleared configuration problems that no delivery waits on any more", metadata: ["count": "\(cleared)"])
        }
    }

    func rescueJobLeases(isStopping: @Sendable () -> Bool) async throws {
        let queue = context.jobQueue
        while !isStopping() {
            let report = try await queue.rescueExpiredLeases(limit: Self.batchSize)
            for (kind, count) in report.rescued {
                context.logger.warning(
                    "rescued jobs whose lease expired", metadata: ["job_kind": "\(kind)", "count": "\(count)"])
                // Every host's workers of that kind, not only this one's.
                try await context.connection.query(SQL.wake, [kind])
            }
            for (kind, count) in report.dead {
                context.logger.error(
                    "jobs ran out of attempts after their lease expired; they are dead",
                    metadata: ["job_kind": "\(kind)", "count": "\(count)"])
            }
            if report.rescued.values.reduce(0, +) + report.dead.values.reduce(0, +) < Self.batchSize { return }
        }
    }

    func endHopelessRetries(isStopping: @Sendable () -> Bool) async throws {
        while !isStopping() {
            let rows = try await context.connection.query(
                SQL.endHopelessRetries, [context.clock.now(), Self.batchSize])
            var ended = 0
            for row in rows {
                let state: String = try row.decode("state")
                let count: Int = try row.decode("deliveries")
                ended += count
                context.logger.info(
                    "ended deliveries waiting for a retry that could no longer be sent",
                    metadata: ["state": "\(state)", "count": "\(count)"])
                countFinished(kind: WorkerKind.dispatch.rawValue, ["completed": count])
            }
            if ended < Self.batchSize { return }
        }
    }

    enum SQL {
        /// Ends up to $2 deliveries waiting for a retry that can no longer be sent, at $1
        /// (`herald.end_hopeless_retries`, `migrations/functions/retry.sql`), and counts them by state.
        static let endHopelessRetries = "SELECT state, deliveries FROM herald.end_hopeless_retries($1, $2)"
        /// Clears, at $1, the configuration problems nothing waits on (`herald.clear_idle_config_problems`,
        /// `migrations/functions/retry.sql`).
        static let clearIdleProblems = "SELECT herald.clear_idle_config_problems($1)"
        /// Wakes the workers of kind $1 on every host (`WakeHub.channel`).
        static let wake = "SELECT pg_notify('\(WakeHub.channel)', $1)"
    }
}
