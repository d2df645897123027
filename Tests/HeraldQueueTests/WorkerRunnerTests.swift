import Foundation
import HeraldPostgres
import HeraldTestSupport
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import HeraldQueue

/// The loops' waits, pauses, gathering and heartbeats are counted on a clock the tests move,
/// where time matters to what they prove (the queue's drain, a backlog and a failing claim run
/// on real time: no wait of theirs is under test).
@Suite struct WorkerRunnerTests {
    let clock = ManualClock()

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
            hub: hub,
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
        let block: ManualClock?
        let batches = Atomic<Int>(0)
        /// `block`: its batch lasts until that clock has moved an hour.
        init(block: ManualClock?) { self.block = block }
        func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
            batches.add(1, ordering: .sequentiallyConsistent)
            if let block { try await block.monotonic.sleep(for: .seconds(3600)) }
            return 0
        }
    }

    @Test func aLoopWaitingForWorkIsNotStuckButOneInABatchAges() async throws {
        let hub = WakeHub(clock: clock.monotonic)
        let idleWorker = BlockingWorker(block: nil)
        let stuckWorker = BlockingWorker(block: clock)
        func runner(_ worker: BlockingWorker) -> WorkerRunner {
            WorkerRunner(
                worker: worker, hub: hub,
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
            #expect(await eventually { waiting.signal.isWaitingForWork })
            #expect(waiting.heartbeat.age == .zero)
            // …while the stuck one's batch ages with the time that passes.
            #expect(stuck.heartbeat.age == .zero)
            clock.advance(by: .milliseconds(300))
            #expect(stuck.heartbeat.age == .milliseconds(300))
            #expect(waiting.heartbeat.age == .zero)
            tasks.cancelAll()
        }
    }

    /// Claims full batches while the test says there is a backlog, nothing otherwise, and
    /// counts the batches of each of its loops (`loop` names them).
    final class BacklogWorker: BatchWorker {
        let kind = "backlog"
        let loop: Int
        let shared: Shared
        final class Shared: Sendable {
            let backlog = Atomic<Bool>(false)
            let batches = Mutex<[Int: Int]>([:])
        }
        init(loop: Int, shared: Shared) {
            self.loop = loop
            self.shared = shared
        }
        func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
            shared.batches.withLock { $0[loop, default: 0] += 1 }
            await Task.yield()
            return shared.backlog.load(ordering: .sequentiallyConsistent) ? limit : 0
        }
    }

    /// A NOTIFY wakes one of the loops that wait; the one that finds a backlog (a full batch)
    /// brings in the other, so a backlog has every loop at it. Without that, the other would
    /// sleep through its hour-long poll.
    @Test func aBacklogBringsInAnotherLoop() async throws {
        let hub = WakeHub()
        let shared = BacklogWorker.Shared()
        let runners = loops(hub: hub) { BacklogWorker(loop: $0, shared: shared) }
        let group = ServiceGroup(services: runners, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            // Both ran their first (empty) batch and wait for work; now the backlog, and one
            // wake-up.
            #expect(
                await eventually(timeout: .seconds(60)) {
                    shared.batches.withLock { $0 } == [0: 1, 1: 1] && runners.allSatisfy(\.signal.isWaitingForWork)
                })
            shared.backlog.store(true, ordering: .sequentiallyConsistent)
            hub.wake(kind: "backlog")
            #expect(
                await eventually(timeout: .seconds(60)) {
                    shared.batches.withLock { $0.values.allSatisfy { $0 >= 3 } }
                }, "\(shared.batches.withLock { $0 })")
            shared.backlog.store(false, ordering: .sequentiallyConsistent)
            tasks.cancelAll()
        }
    }

    /// Takes every item waiting (up to the limit) in one batch, and records each batch's size;
    /// its work arrives a commit at a time.
    final class TrickleWorker: BatchWorker {
        let kind = "trickle"
        let waiting = Atomic<Int>(0)
        let batches = Mutex<[Int]>([])
        var gathersWakeUps: Bool { true }
        func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
            let taken = min(limit, waiting.exchange(0, ordering: .sequentiallyConsistent))
            batches.withLock { $0.append(taken) }
            return taken
        }
    }

    func trickle(gather: Duration) -> (TrickleWorker, WakeHub, [WorkerRunner]) {
        let worker = TrickleWorker()
        let hub = WakeHub(clock: clock.monotonic)
        return (worker, hub, loops(hub: hub, gather: gather) { _ in worker })
    }

    /// A commit, as the NOTIFY of its commit wakes the loops.
    func commit(_ worker: TrickleWorker, _ hub: WakeHub) {
        worker.waiting.add(1, ordering: .sequentiallyConsistent)
        hub.wake(kind: "trickle")
    }

    /// Runs two loops gathering for `gather`; `body` starts once both have made their first
    /// (empty) claim and a first commit, with none before it, was claimed at once.
    func trickling(gather: Duration, _ body: (TrickleWorker, WakeHub) async throws -> Void) async throws {
        let (worker, hub, runners) = trickle(gather: gather)
        let group = ServiceGroup(services: runners, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(
                await eventually(timeout: .seconds(60)) {
                    worker.batches.withLock { $0 } == [0, 0] && runners.allSatisfy(\.signal.isWaitingForWork)
                })
            // Past the pause after a claim that found nothing.
            clock.advance(by: WorkerRunner.Configuration(batchSize: 1, pollInterval: .zero).emptyClaimPause)
            commit(worker, hub)
            #expect(await eventually(timeout: .seconds(60)) { worker.batches.withLock { $0 } == [0, 0, 1] })
            try await body(worker, hub)
            tasks.cancelAll()
        }
    }

    /// Commits that come closer together than the gathering lasts wait for one another: the
    /// loop woken gathers, nobody else is woken meanwhile, and one claim takes several commits'
    /// work.
    @Test func commitsCloseTogetherAreGatheredIntoOneClaim() async throws {
        try await trickling(gather: .seconds(2)) { worker, hub in
            // With no time between them, and the first right after the commit before it.
            for _ in 0..<4 { commit(worker, hub) }
            // The loop woken gathers until its gathering has passed.
            #expect(
                await eventually(timeout: .seconds(10)) {
                    clock.advance(by: .seconds(2))
                    return worker.batches.withLock { $0.dropFirst(3).reduce(0, +) } == 4
                })
            #expect(worker.batches.withLock { Array($0.dropFirst(3)) } == [4])
        }
    }

    /// A commit that comes longer after the one before it than the gathering lasts is claimed
    /// at once: a trickle slower than that pays no wait.
    @Test func aCommitAfterAQuietSpellIsClaimedAtOnce() async throws {
        try await trickling(gather: .seconds(3)) { worker, hub in
            clock.advance(by: .milliseconds(3500))
            commit(worker, hub)
            // With no time passing: gathering would have held it until the clock moved 3 s.
            #expect(await eventually(timeout: .seconds(10)) { worker.batches.withLock { $0.count } == 4 })
        }
    }

    /// A flood of wake-ups for a worker with nothing to do (any session may NOTIFY herald_jobs)
    /// costs each loop a claim a pause, not one a wake-up: the count is bounded by the pauses
    /// the flood lasted.
    @Test func aFloodOfWakeUpsWithNothingToDoCostsAClaimAPause() async throws {
        let worker = TrickleWorker()
        let hub = WakeHub(clock: clock.monotonic)
        let group = ServiceGroup(services: loops(2, hub: hub) { _ in worker }, logger: Logger(label: "test"))
        let pause = WorkerRunner.Configuration(batchSize: 1, pollInterval: .zero).emptyClaimPause
        try await group.runUntil {
            #expect(await eventually(timeout: .seconds(60)) { worker.batches.withLock { $0.count } == 2 })
            let pauses = 5
            var wakes = 0
            for _ in 0..<pauses {
                for _ in 0..<200 {
                    hub.wake(kind: "trickle")
                    wakes += 1
                    await Task.yield()
                }
                clock.advance(by: pause)
            }
            #expect(await eventually(timeout: .seconds(10)) { worker.batches.withLock { $0.count } > 2 }, "woken")
            let claims = worker.batches.withLock { $0.count } - 2
            #expect(claims <= 2 * (pauses + 1), "\(claims) claims for \(wakes) wake-ups over \(pauses) pauses")
        }
    }

    /// A loop that stops leaves the wake-ups to the others: one woken to stop covers nothing.
    @Test func aLoopThatStopsLeavesWakeUpsToTheOthers() async throws {
        let worker = TrickleWorker()
        let hub = WakeHub(clock: clock.monotonic)
        let stopping = loops(1, hub: hub) { _ in worker }[0]
        let other = hub.register(kind: "trickle")
        let group = ServiceGroup(services: [stopping], logger: Logger(label: "test"))
        try await group.runUntil {
            #expect(await eventually(timeout: .seconds(60)) { stopping.signal.isWaitingForWork })
        }
        // Its wait ends only if woken: the clock does not move.
        let waiting = Task { await other.wait(timeout: .seconds(60)) }
        #expect(await eventually(timeout: .seconds(60)) { other.isWaitingForWork })
        hub.wake(kind: "trickle")
        #expect(await eventually(timeout: .seconds(10)) { !other.isWaitingForWork }, "the wake-up went nowhere")
        waiting.cancel()
    }

    /// Fails its claims in loop 0 while `failing` is set (that loop's connection is down), and
    /// counts the items each loop takes.
    final class OneBrokenLoopWorker: BatchWorker {
        let kind = "broken"
        let loop: Int
        let shared: Shared
        final class Shared: Sendable {
            let failing = Atomic<Bool>(false)
            let waiting = Atomic<Int>(0)
            let taken = Mutex<[Int: Int]>([:])
        }
        struct Down: Error {}
        init(loop: Int, shared: Shared) {
            self.loop = loop
            self.shared = shared
        }
        func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
            if loop == 0, shared.failing.load(ordering: .sequentiallyConsistent) { throw Down() }
            let taken = shared.waiting.exchange(0, ordering: .sequentiallyConsistent)
            shared.taken.withLock { $0[loop, default: 0] += taken }
            return taken
        }
    }

    /// A wake-up that reached a loop whose claim fails goes on to a loop that waits for work.
    @Test func aWakeUpWhoseClaimFailsGoesToAnotherLoop() async throws {
        let hub = WakeHub()
        let shared = OneBrokenLoopWorker.Shared()
        let runners = loops(hub: hub) { OneBrokenLoopWorker(loop: $0, shared: shared) }
        let group = ServiceGroup(services: runners, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(await eventually(timeout: .seconds(60)) { runners.allSatisfy(\.signal.isWaitingForWork) })
            shared.failing.store(true, ordering: .sequentiallyConsistent)
            shared.waiting.add(1, ordering: .sequentiallyConsistent)
            hub.wake(kind: "broken")  // to loop 0, the first that waits
            #expect(await eventually(timeout: .seconds(60)) { shared.taken.withLock { $0[1] } == 1 })
            tasks.cancelAll()
        }
    }
}

/// `count` loops on `hub`, each with the worker `worker(loop)`, polling once an hour (only a
/// wake-up brings work), at most 100 a batch.
func loops(
    _ count: Int = 2, hub: WakeHub, gather: Duration = .milliseconds(1), _ worker: (Int) -> any BatchWorker
) -> [WorkerRunner] {
    (0..<count).map { loop in
        WorkerRunner(
            worker: worker(loop), hub: hub,
            configuration: .init(batchSize: 100, pollInterval: .seconds(3600), gather: gather),
            logger: Logger(label: "test"))
    }
}

extension ServiceGroup {
    /// Runs the group while `body` runs, then shuts it down gracefully and waits for it.
    func runUntil(_ body: () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await self.run() }
            try await body()
            await triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
