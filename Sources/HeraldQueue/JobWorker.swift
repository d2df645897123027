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
    private let claimTimer: StatementTimer
    private let recordTimer: StatementTimer

    public var kind: String { handler.kind }

    public init(_ handler: any JobHandler, queue: JobQueue, logger: Logger) {
        self.handler = handler
        self.queue = queue
        var logger = logger
        logger[metadataKey: "kind"] = "\(handler.kind)"
        self.logger = logger
        claimTimer = StatementTimer(kind: handler.kind, .claim)
        recordTimer = StatementTimer(kind: handler.kind, .record)
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let claimedAt = ContinuousClock.now
        let jobs = try await queue.claim(kind: handler.kind, limit: limit)
        claimTimer.finished(since: claimedAt, rows: jobs.count, logger: logger)
        guard !jobs.isEmpty else { return 0 }
        let answers = await handler.handle(jobs)
        await record(jobs, answers, stopping: isStopping(), leaseEnds: claimedAt.advanced(by: queue.lease))
        return jobs.count
    }

    private func record(
        _ jobs: [Job], _ answers: [Int64: JobOutcome], stopping: Bool, leaseEnds: ContinuousClock.Instant
    ) async {
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
        let recording = ContinuousClock.now
        _ = await recordWithinLease(until: leaseEnds, logger: logger, items: jobs.count) {
            try await queue.finish(outcomes)
            try await queue.release(unanswered)
        }
        recordTimer.finished(since: recording, rows: jobs.count, logger: logger)
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
