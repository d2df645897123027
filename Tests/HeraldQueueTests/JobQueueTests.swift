import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct JobQueueTests {
    func insertJobs(_ connection: PostgresConnection, kind: String, count: Int, maxAttempts: Int = 25) async throws {
        try await connection.query(
            "INSERT INTO herald.jobs (kind, ref, max_attempts, run_at) SELECT $1, n, $3, '2000-01-01' FROM generate_series(1, $2) n",
            [kind, count, maxAttempts])
    }

    func state(_ connection: PostgresConnection, job: Int64) async throws -> (
        state: String, runAt: Date, attempts: Int, error: String?
    )? {
        let result = try await connection.query(
            "SELECT state, run_at, attempts, last_error FROM herald.jobs WHERE id = $1", [job])
        guard let row = result.first else { return nil }
        return (try row.decode(0), try row.decode(1), try row.decode(2), try row.decode(3, as: String?.self))
    }

    @Test func concurrentClaimersTakeEveryJobExactlyOnce() async throws {
        let database = try await TestDatabase.create()
        let setup = try await database.connect()
        try await insertJobs(setup, kind: "contention", count: 5000)

        let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for claimer in 0..<6 {
                group.addTask {
                    let queue = JobQueue(connection: try await database.connect(), workerID: "claimer-\(claimer)")
                    var mine: [Int64] = []
                    while true {
                        let batch = try await queue.claim(kind: "contention", limit: 37)
                        if batch.isEmpty { return mine }
                        mine += batch.map(\.id)
                        try await queue.finish(batch.map { ($0, .completed) })
                    }
                }
            }
            return try await group.reduce(into: [Int64]()) { $0 += $1 }
        }
        #expect(claimed.count == 5000)
        #expect(Set(claimed).count == 5000)
        #expect(try await setup.query("SELECT count(*) FROM herald.jobs")[0].decode(0, as: Int.self) == 0)
    }

    @Test func claimTakesOnlyDueJobsOfItsKindOldestFirst() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let queue = JobQueue(connection: connection, workerID: "w", clock: clock)
        let later = try await queue.enqueue(kind: "a", runAt: clock.now().addingTimeInterval(60))
        let second = try await queue.enqueue(kind: "a", runAt: clock.now().addingTimeInterval(-5))
        let first = try await queue.enqueue(kind: "a", runAt: clock.now().addingTimeInterval(-10))
        _ = try await queue.enqueue(kind: "b", runAt: clock.now().addingTimeInterval(-20))

        let batch = try await queue.claim(kind: "a", limit: 10)
        #expect(Set(batch.map(\.id)) == [first, second])
        #expect(batch.allSatisfy { $0.attempts == 1 && $0.kind == "a" })
        clock.advance(by: .seconds(61))
        #expect(try await queue.claim(kind: "a", limit: 10).map(\.id) == [later])
    }

    @Test func expiredLeaseIsRescuedAndCompletedJobIsNeverClaimedAgain() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let crashed = JobQueue(connection: connection, workerID: "crashed", clock: clock, lease: .seconds(30))
        let survivor = JobQueue(connection: connection, workerID: "survivor", clock: clock, lease: .seconds(30))
        let abandoned = try await crashed.enqueue(kind: "k", runAt: clock.now())
        let done = try await crashed.enqueue(kind: "k", runAt: clock.now())
        let claimed = try await crashed.claim(kind: "k", limit: 10)
        #expect(claimed.count == 2)
        try await crashed.finish([(claimed.first { $0.id == done }!, .completed)])

        // Within the lease nothing is rescued.
        clock.advance(by: .seconds(29))
        #expect(try await survivor.rescueExpiredLeases().isEmpty)
        #expect(try await survivor.claim(kind: "k", limit: 10).isEmpty)

        clock.advance(by: .seconds(2))
        #expect(try await survivor.rescueExpiredLeases().rescued == ["k": 1])
        let again = try await survivor.claim(kind: "k", limit: 10)
        #expect(again.map(\.id) == [abandoned])
        #expect(again.first?.attempts == 2)
        #expect(try await state(connection, job: abandoned)?.error?.contains("lease expired: crashed") == true)
        try await survivor.finish([(again[0], .completed)])
        #expect(try await survivor.claim(kind: "k", limit: 10).isEmpty)
        #expect(try await state(connection, job: done) == nil)
    }

    @Test func jobThatKeepsLosingItsLeaseEndsDead() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let queue = JobQueue(connection: connection, workerID: "w", clock: clock, lease: .seconds(10))
        let id = try await queue.enqueue(kind: "k", runAt: clock.now(), maxAttempts: 2)
        for _ in 0..<2 {
            #expect(try await queue.claim(kind: "k", limit: 1).count == 1)
            clock.advance(by: .seconds(11))
            _ = try await queue.rescueExpiredLeases()
        }
        let final = try await state(connection, job: id)
        #expect(final?.state == "dead")
        #expect(final?.error?.contains("lease expired") == true)
    }

    @Test func failedJobBacksOffLongerEachAttemptThenDiesWithItsReason() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        // random() = 1 picks the top of the jitter range, so each delay is the ceiling.
        let queue = JobQueue(
            connection: connection, workerID: "w", clock: clock,
            backoff: Backoff(base: .seconds(1), cap: .seconds(3600), random: { 1 }))
        let id = try await queue.enqueue(kind: "k", runAt: clock.now(), maxAttempts: 5)

        var delays: [Double] = []
        for attempt in 1...5 {
            let batch = try await queue.claim(kind: "k", limit: 1)
            #expect(batch.map(\.id) == [id], "attempt \(attempt) should find the job due")
            try await queue.finish([(batch[0], .retry(error: "upstream said no (\(attempt))"))])
            let row = try await state(connection, job: id)!
            if attempt < 5 {
                #expect(row.state == "ready")
                let delay = row.runAt.timeIntervalSince(clock.now())
                delays.append(delay)
                // Not due a moment before its time.
                clock.advance(by: .seconds(delay - 0.01))
                #expect(try await queue.claim(kind: "k", limit: 1).isEmpty)
                clock.advance(by: .milliseconds(20))
            } else {
                #expect(row.state == "dead")
                #expect(row.error == "gave up after 5 attempts: upstream said no (5)")
            }
        }
        #expect(delays.map { $0.rounded() } == [1, 2, 4, 8])
        #expect(try await queue.claim(kind: "k", limit: 1).isEmpty)
    }

    @Test func retryAfterIsHonouredAndDeadOutcomeDiesAtOnce() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let queue = JobQueue(connection: connection, workerID: "w", clock: clock, backoff: Backoff(random: { 0 }))
        let slow = try await queue.enqueue(kind: "k", runAt: clock.now())
        let doomed = try await queue.enqueue(kind: "k", runAt: clock.now())
        let batch = try await queue.claim(kind: "k", limit: 2)
        try await queue.finish(
            batch.map { job in
                (job, job.id == slow ? .retry(error: "503", notBefore: .seconds(120)) : .dead(reason: "bad payload"))
            })
        #expect(try await state(connection, job: slow)?.runAt == clock.now().addingTimeInterval(120))
        let dead = try await state(connection, job: doomed)
        #expect(dead?.state == "dead")
        #expect(dead?.error == "bad payload")
        #expect(dead?.attempts == 1)
    }

    @Test func releaseReturnsJobsWithoutCountingTheAttempt() async throws {
        let connection = try await TestDatabase.create().connect()
        let queue = JobQueue(connection: connection, workerID: "w")
        let id = try await queue.enqueue(kind: "k")
        let batch = try await queue.claim(kind: "k", limit: 1)
        try await queue.release(batch)
        let row = try await state(connection, job: id)
        #expect(row?.state == "ready")
        #expect(row?.attempts == 0)
    }

    @Test func failureFromAWorkerThatLostItsLeaseDoesNotDisturbTheNewHolder() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let slow = JobQueue(connection: connection, workerID: "slow", clock: clock, lease: .seconds(5))
        let other = JobQueue(connection: connection, workerID: "other", clock: clock, lease: .seconds(5))
        let id = try await slow.enqueue(kind: "k", runAt: clock.now())
        let stale = try await slow.claim(kind: "k", limit: 1)
        clock.advance(by: .seconds(6))
        _ = try await other.rescueExpiredLeases()
        #expect(try await other.claim(kind: "k", limit: 1).count == 1)
        try await slow.finish([(stale[0], .retry(error: "late"))])
        let row = try await state(connection, job: id)
        #expect(row?.state == "running")
        #expect(row?.attempts == 2)
    }
}

@Suite struct PostponeTests {
    @Test func postponedJobKeepsItsAttemptAndNeverDies() async throws {
        let connection = try await TestDatabase.create().connect()
        let clock = ManualClock()
        let queue = JobQueue(connection: connection, workerID: "w", clock: clock)
        let id = try await queue.enqueue(kind: "k", runAt: clock.now(), maxAttempts: 1)
        for _ in 0..<3 {
            let batch = try await queue.claim(kind: "k", limit: 1)
            #expect(batch.map(\.id) == [id])
            try await queue.finish([(batch[0], .postpone(by: .seconds(30), reason: "app not ready"))])
            let row = try await connection.query(
                "SELECT state, attempts, run_at, last_error FROM herald.jobs WHERE id = $1", [id])[0]
            #expect(try row.decode(0, as: String.self) == "ready")
            #expect(try row.decode(1, as: Int.self) == 0)
            #expect(try row.decode(2, as: Date.self) == clock.now().addingTimeInterval(30))
            #expect(try row.decode(3, as: String.self) == "app not ready")
            clock.advance(by: .seconds(30))
        }
    }
}
