import HeraldQueue

/// The retry worker's first pass: `herald.jobs` rows whose lease ran out (their process died or
/// hung) go back to the queue, with the attempt counted, or dead when it was the last one, and
/// their workers on every host are woken. Deliveries need no such pass: a delivery whose lease
/// ran out is due again, and the next claim takes it over.
struct JobLeaseRescue {
    let context: WorkerContext
    /// Rows per statement; a pass repeats until a statement finds fewer.
    static let batchSize = 1000

    func pass(isStopping: @Sendable () -> Bool) async throws {
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

    enum SQL {
        /// Wakes the workers of kind $1 on every host (`WakeHub.channel`).
        static let wake = "SELECT pg_notify('\(WakeHub.channel)', $1)"
    }
}
