import HeraldPostgres
import Logging
import Metrics

/// Runs a ``JobHandler`` over `herald.jobs`: claim a batch of its kind, hand it over, finish
/// every outcome with one statement.
///
/// On graceful shutdown, jobs the handler left unanswered are released without counting the
/// attempt; otherwise an unanswered job is retried with an error naming the omission.
public struct JobWorker: BatchWorker {
    let handler: any JobHandler
    let queue: JobQueue
    let logger: Logger
    /// The elapsed time: the lease a record retries within, and the statements' timings.
    let clock: any MonotonicClock
    private let claimTimer: StatementTimer
    private let recordTimer: StatementTimer

    public var kind: String { handler.kind }

    public init(
        _ handler: any JobHandler, queue: JobQueue, logger: Logger, clock: any MonotonicClock = ContinuousClock()
    ) {
        self.handler = handler
        self.queue = queue
        self.clock = clock
        var logger = logger
        logger[metadataKey: "kind"] = "\(handler.kind)"
        self.logger = logger
        claimTimer = StatementTimer(kind: handler.kind, .claim)
        recordTimer = StatementTimer(kind: handler.kind, .record)
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let claimedAt = clock.now
        let jobs = try await queue.claim(kind: handler.kind, limit: limit)
        claimTimer.finished(took: clock.now - claimedAt, rows: jobs.count, logger: logger)
        guard !jobs.isEmpty else { return 0 }
        let answers = await handler.handle(jobs)
        await record(jobs, answers, isStopping: isStopping, leaseEnds: claimedAt.advanced(by: queue.lease))
        return jobs.count
    }

    private func record(
        _ jobs: [Job], _ answers: [Int64: JobOutcome], isStopping: @escaping @Sendable () -> Bool,
        leaseEnds: ContinuousClock.Instant
    ) async {
        let stopping = isStopping()
        var outcomes: [(job: Job, outcome: JobOutcome)] = []
        var unanswered: [Job] = []
        outcomes.reserveCapacity(jobs.count)
        for job in jobs {
            if let outcome = answers[job.id] {
                outcomes.append((job, outcome))
            } else if stopping {
                unanswered.append(job)
            } else {
                outcomes.append(
                    (job, .retry(error: "the \(handler.kind) worker returned no outcome for job \(job.id)")))
            }
        }
        countFinished(
            kind: handler.kind,
            Dictionary(grouping: outcomes, by: { $0.outcome.metricName }).mapValues(\.count))
        let recording = clock.now
        _ = await recordWithinLease(
            until: leaseEnds, clock: clock, logger: logger, items: jobs.count, isStopping: isStopping
        ) {
            do {
                try await queue.finish(outcomes)
            } catch let error as PostgresError where !error.isTransient {
                try await finishOneByOne(outcomes, refused: error)
            }
            try await queue.release(unanswered)
        }
        recordTimer.finished(took: clock.now - recording, rows: jobs.count, logger: logger)
    }

    /// The database refused the batch's record for what it holds (SQLSTATE class 22, 23…), not
    /// for being away: each job is recorded alone, and one whose outcome is refused again fails
    /// for good with the reason. Tried again as a whole, it would be refused until its lease
    /// ran out, then claimed and refused again, forever.
    private func finishOneByOne(_ outcomes: [(job: Job, outcome: JobOutcome)], refused: PostgresError) async throws {
        logger.error(
            "the database refused a batch's outcomes; recording each job alone",
            metadata: ["error": "\(refused)", "items": "\(outcomes.count)"])
        for (job, outcome) in outcomes {
            do {
                try await queue.finish([(job, outcome)])
            } catch let error as PostgresError where !error.isTransient {
                logger.error(
                    "a job's outcome cannot be recorded; it fails for good",
                    metadata: ["job": "\(job.id)", "outcome": "\(outcome.metricName)", "error": "\(error)"])
                let reason = "Herald could not record this job's outcome (\(outcome.metricName)): \(error.message)"
                try await queue.finish([(job, .dead(reason: reason))])
            }
        }
    }
}

extension JobOutcome {
    /// The `outcome` label of `herald_jobs_finished_total`.
    public var metricName: String {
        switch self {
        case .completed: return "completed"
        case .retry: return "retry"
        case .dead: return "dead"
        case .postpone: return "postponed"
        }
    }
}

/// Counts finished items in `herald_jobs_finished_total`, one update per outcome and batch.
public func countFinished(kind: String, _ counts: [String: Int]) {
    for (outcome, count) in counts where count > 0 {
        Counter(label: "herald_jobs_finished_total", dimensions: [("kind", kind), ("outcome", outcome)])
            .increment(by: count)
    }
}
