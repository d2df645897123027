import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import Testing

/// A batch's outcomes that the database refuses, or cannot take while the daemon stops: the
/// worker neither loops over them nor outstays its stop timeout (issue #40).
@Suite struct JobRecordTests {
    struct Answering: JobHandler {
        let kind = "answering"
        let answer: @Sendable ([Job]) async -> [Int64: JobOutcome]
        func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] { await answer(jobs) }
    }

    /// An outcome PostgreSQL cannot hold (a `notBefore` of 81 million years, which was a
    /// garbage outcome's, and a NUL in the reason) once failed the whole batch's record until
    /// its lease ran out, then again at every claim. Now the wait is bounded, the text made
    /// storable, and the other jobs of the batch recorded.
    @Test func anOutcomePostgreSQLCannotHoldIsRecordedBoundedAndTheBatchWithIt() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.query("INSERT INTO herald.jobs (kind, ref) VALUES ('answering', 1), ('answering', 2)")
        let queue = JobQueue(connection: db, workerID: "test", lease: .seconds(2))
        let worker = JobWorker(
            Answering { jobs in
                [
                    jobs[0].id: .retry(error: "gone\u{0}<0>FORGED", notBefore: .seconds(2_580_000_000_000_000)),
                    jobs[1].id: .completed,
                ]
            }, queue: queue, logger: Logger(label: "test"))
        #expect(try await worker.runBatch(limit: 10, isStopping: { false }) == 2)
        let rows = try await db.query(
            "SELECT state, run_at - now() < interval '1 day 1 minute', last_error FROM herald.jobs")
        #expect(rows.count == 1, "the completed job is gone")
        #expect(try rows[0].decode(0, as: String.self) == "ready")
        #expect(try rows[0].decode(1, as: Bool.self), "due again within a day")
        #expect(try rows[0].decode(2, as: String.self) == "gone\u{FFFD}<0>FORGED")
    }

    /// SIGTERM while the database cannot take the batch's record (here: the jobs table locked,
    /// each statement cancelled after 300 ms): the worker gives up within its grace (5 s; the
    /// bound leaves room for a loaded machine), not at the lease's end (60 s), and the jobs stay
    /// leased for lease rescue.
    @Test func aStoppingWorkerGivesUpRecordingWithinItsGrace() async throws {
        let database = try await TestDatabase.create()
        let admin = try await database.connect()
        let locker = try await database.connect()
        let db = try await database.connect()
        try await db.execute("SET statement_timeout = '300ms'")
        try await admin.query("INSERT INTO herald.jobs (kind, ref) VALUES ('answering', 1)")
        let queue = JobQueue(connection: db, workerID: "test", lease: .seconds(60))
        let worker = JobWorker(
            Answering { jobs in
                try? await locker.execute("BEGIN; LOCK TABLE herald.jobs IN EXCLUSIVE MODE")
                return Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, JobOutcome.completed) })
            }, queue: queue, logger: Logger(label: "test"))
        let started = ContinuousClock.now
        #expect(try await worker.runBatch(limit: 10, isStopping: { true }) == 1)
        let took = ContinuousClock.now - started
        #expect(took < shutdownGrace + .seconds(25), "gave up after \(took), not at the lease's end")
        try await locker.execute("ROLLBACK")
        #expect(try await admin.query("SELECT state FROM herald.jobs")[0].decode(0, as: String.self) == "running")
    }
}
