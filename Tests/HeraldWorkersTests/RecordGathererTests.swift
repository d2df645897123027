import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldWorkers
import Testing

/// The daemon's dispatch holds a small batch's outcomes for a moment and records them with the
/// next ones, in one statement (RecordGatherer); a large batch's are recorded at once.
@Suite struct RecordGathererTests {
    /// Each delivery's state, and how many transactions wrote them (their rows' xmin).
    static func recorded(_ f: WorkerFixture) async throws -> (states: [String], transactions: Int) {
        let row = try await f.db.query(
            "SELECT array_agg(state ORDER BY id), count(DISTINCT xmin::text) FROM herald.deliveries")[0]
        return (try row.decode(0, as: [String].self), try row.decode(1, as: Int.self))
    }

    @Test func smallBatchesAreRecordedTogetherOnceTheWindowHasPassed() async throws {
        let f = try await WorkerFixture.make()
        var context = f.context
        context.recordWindow = .seconds(30)
        for device in ["a", "b", "c"] {
            try await f.register(device, "android", user: device)
            try await f.db.execute("SELECT herald.send('shop', user_ref => '\(device)', title => 'hi')")
        }
        try await f.ingest()
        let worker = DispatchWorker(context: context)
        for _ in 0..<3 { #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1) }
        // Sent, and held: the leases are still there, none recorded yet.
        #expect(await f.messages(to: "token-a").count == 1)
        #expect(try await Self.recorded(f).states == ["queued", "queued", "queued"])
        // A stopping loop records what it holds without waiting out the window.
        try await confirmation { done in
            let started = ContinuousClock.now
            await worker.finish()
            if ContinuousClock.now - started < .seconds(10) { done() }
        }
        let after = try await Self.recorded(f)
        #expect(after.states == ["sent", "sent", "sent"])
        #expect(after.transactions == 1, "the three outcomes in one record")
    }

    @Test func outcomesHeldAreRecordedWhenTheWindowEnds() async throws {
        let f = try await WorkerFixture.make()
        var context = f.context
        context.recordWindow = .milliseconds(300)
        try await f.register("pixel", "android")
        try await f.db.execute("SELECT herald.send('shop', user_ref => 'alice', title => 'hi')")
        try await f.ingest()
        let worker = DispatchWorker(context: context)
        #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1)
        #expect(try await Self.recorded(f).states == ["queued"])
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while try await Self.recorded(f).states != ["sent"], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await Self.recorded(f).states == ["sent"], "recorded with no loop stopping")
        await worker.finish()
    }

    @Test func aLargeBatchIsRecordedAtOnce() async throws {
        let f = try await WorkerFixture.make()
        var context = f.context
        context.recordWindow = .seconds(30)
        try await f.register("pixel", "android")
        try await f.db.execute(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'n' || n) FROM generate_series(1, 64) AS n")
        try await f.ingest()
        let worker = DispatchWorker(context: context)
        #expect(try await worker.runBatch(limit: 64, isStopping: { false }) == 64)
        #expect(try await Self.recorded(f).states == Array(repeating: "sent", count: 64))
        await worker.finish()
    }
}
