import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@Suite struct WorkerRunnerTests {
    /// Completes even refs, asks to retry odd ones once, and records every batch size.
    final class RecordingHandler: JobHandler {
        let kind = "record"
        let batches = Mutex<[Int]>([])
        func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
            batches.withLock { $0.append(jobs.count) }
            var outcomes: [Int64: JobOutcome] = [:]
            for job in jobs {
                outcomes[job.id] = (job.ref ?? 0) % 2 == 1 && job.attempts == 1 ? .retry(error: "odd") : .completed
            }
            return outcomes
        }
    }

    @Test func drainsTheQueueInBatchesAndRecordsOutcomes() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        try await connection.query(
            "INSERT INTO herald.jobs (kind, ref) SELECT 'record', n FROM generate_series(1, 250) n")
        let handler = RecordingHandler()
        let hub = WakeHub()
        let queue = JobQueue(
            connection: connection, workerID: "t", backoff: Backoff(base: .milliseconds(1), random: { 0 }))
        let runner = WorkerRunner(
            worker: JobWorker(handler, queue: queue, logger: Logger(label: "test")),
            signal: hub.register(kind: "record"),
            configuration: .init(batchSize: 100, pollInterval: .milliseconds(50)),
            logger: Logger(label: "test"))
        let group = ServiceGroup(services: [runner], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // A minute: beside the whole suite on two cores, the 375 took longer than 10 s.
            let drained = try await eventually(timeout: .seconds(60)) {
                try await connection.query("SELECT count(*) FROM herald.jobs")[0].decode(0, as: Int.self) == 0
            }
            #expect(drained)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let batches = handler.batches.withLock { $0 }
        // 250 first attempts and the 125 odd ones again (retries with no delay join the
        // batches as soon as they are due). Claims start small and double while they come
        // back full, up to the batch size, never beyond.
        #expect(batches.prefix(4) == [10, 20, 40, 80])
        #expect(batches.contains(100))
        #expect(batches.allSatisfy { $0 <= 100 })
        #expect(batches.reduce(0, +) == 375)
    }

    /// A loop waiting for work is not stuck, however long its poll interval: the watchdog
    /// reads its heartbeat as fresh. One in a batch ages.
    final class BlockingWorker: BatchWorker {
        let kind = "blocking"
        let block: Bool
        let batches = Atomic<Int>(0)
        init(block: Bool) { self.block = block }
        func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
            batches.add(1, ordering: .sequentiallyConsistent)
            if block { try await Task.sleep(for: .seconds(30)) }
            return 0
        }
    }

    @Test func aLoopWaitingForWorkIsNotStuckButOneInABatchAges() async throws {
        let hub = WakeHub()
        let idleWorker = BlockingWorker(block: false)
        let stuckWorker = BlockingWorker(block: true)
        func runner(_ worker: BlockingWorker) -> WorkerRunner {
            WorkerRunner(
                worker: worker, signal: hub.register(kind: "blocking"),
                configuration: .init(batchSize: 10, pollInterval: .seconds(3600)), logger: Logger(label: "test"))
        }
        let waiting = runner(idleWorker)
        let stuck = runner(stuckWorker)
        let group = ServiceGroup(services: [waiting, stuck], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // Both loops have begun their first batch; the idle one has finished it and waits.
            #expect(
                try await eventually {
                    idleWorker.batches.load(ordering: .sequentiallyConsistent) == 1
                        && stuckWorker.batches.load(ordering: .sequentiallyConsistent) == 1
                })
            // The waiting loop reads as fresh (it would age without end if waiting counted)…
            #expect(await eventually { waiting.heartbeat.age == .zero })
            // …while the stuck one's batch began before this sleep, so it is at least that old.
            try await Task.sleep(for: .milliseconds(300))
            #expect(stuck.heartbeat.age >= .milliseconds(300))
            #expect(waiting.heartbeat.age == .zero)
            tasks.cancelAll()
        }
    }
}
