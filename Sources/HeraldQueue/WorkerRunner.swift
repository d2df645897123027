import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// The loop that feeds one ``JobHandler``: claim a batch, hand it over, finish it with one
/// statement, repeat.
///
/// After a full batch it claims again at once; otherwise it waits for a NOTIFY (through its
/// ``WakeSignal``) or the poll interval, whichever comes first. On graceful shutdown it
/// finishes the batch in hand and stops; jobs it cannot finish are released.
public final class WorkerRunner: Service {
    public struct Configuration: Sendable {
        /// Jobs claimed per round trip. Default 100.
        public var batchSize: Int = 100
        /// The longest wait between claims when no NOTIFY arrives. Default 2 s.
        public var pollInterval: Duration = .seconds(2)

        public init(batchSize: Int = 100, pollInterval: Duration = .seconds(2)) {
            self.batchSize = batchSize
            self.pollInterval = pollInterval
        }
    }

    private let handler: any JobHandler
    private let queue: JobQueue
    private let signal: WakeSignal
    private let configuration: Configuration
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    public let heartbeat = Heartbeat()
    private let claimDuration: Metrics.Timer

    public init(
        handler: any JobHandler, queue: JobQueue, signal: WakeSignal, configuration: Configuration, logger: Logger
    ) {
        self.handler = handler
        self.queue = queue
        self.signal = signal
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "kind"] = "\(handler.kind)"
        self.logger = logger
        claimDuration = Metrics.Timer(label: "herald_claim_duration_seconds", dimensions: [("kind", handler.kind)])
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await loop()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.signal.signal()
        }
    }

    private var shouldStop: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    private func loop() async {
        var errorDelay = RetryDelay()
        while !shouldStop {
            heartbeat.beat()
            let jobs: [Job]
            do {
                let started = ContinuousClock.now
                jobs = try await queue.claim(kind: handler.kind, limit: configuration.batchSize)
                claimDuration.record(duration: ContinuousClock.now - started)
                errorDelay.reset()
            } catch {
                logger.error("claim failed; retrying", metadata: ["error": "\(error)"])
                await signal.wait(timeout: errorDelay.next())
                continue
            }
            if jobs.isEmpty {
                await signal.wait(timeout: configuration.pollInterval)
                continue
            }
            let answers = await handler.handle(jobs)
            await record(jobs, answers)
            if jobs.count < configuration.batchSize {
                await signal.wait(timeout: configuration.pollInterval)
            }
        }
        logger.debug("worker stopped")
    }

    /// Records a batch's outcomes, retrying while the database is away: the work is done, and
    /// losing the record would mean doing it again after the lease expires.
    private func record(_ jobs: [Job], _ answers: [Int64: JobOutcome]) async {
        var outcomes: [(job: Job, outcome: JobOutcome)] = []
        var unanswered: [Job] = []
        outcomes.reserveCapacity(jobs.count)
        for job in jobs {
            if let outcome = answers[job.id] {
                outcomes.append((job, outcome))
            } else if shouldStop {
                unanswered.append(job)
            } else {
                outcomes.append(
                    (job, .retry(error: "the \(handler.kind) worker returned no outcome for job \(job.id)")))
            }
        }
        for (outcome, count) in Dictionary(grouping: outcomes, by: { Self.metricName($0.outcome) }).mapValues(\.count) {
            Counter(label: "herald_jobs_finished_total", dimensions: [("kind", handler.kind), ("outcome", outcome)])
                .increment(by: count)
        }
        var delay = RetryDelay()
        let deadline = ContinuousClock.now.advanced(by: queue.lease)
        while true {
            do {
                try await queue.finish(outcomes)
                try await queue.release(unanswered)
                return
            } catch {
                guard ContinuousClock.now < deadline else {
                    logger.error(
                        "cannot record a batch; its jobs will be rescued when their lease expires",
                        metadata: ["error": "\(error)", "jobs": "\(jobs.count)"])
                    return
                }
                logger.warning("recording a batch failed; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: delay.next())
            }
        }
    }
}

extension WorkerRunner {
    static func metricName(_ outcome: JobOutcome) -> String {
        switch outcome {
        case .completed: return "completed"
        case .retry: return "retry"
        case .dead: return "dead"
        case .postpone: return "postponed"
        }
    }
}

/// A doubling delay for retrying the database after an error: 100 ms up to 5 s.
struct RetryDelay {
    private var current: Duration = .milliseconds(100)
    mutating func next() -> Duration {
        defer { current = min(current * 2, .seconds(5)) }
        return current
    }
    mutating func reset() { current = .milliseconds(100) }
}
