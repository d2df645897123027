import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// The daemon's dispatch records a small batch's outcomes at once after a quiet moment, and
/// holds those that follow closely to record them together, in one statement, a window after
/// the record before (RecordGatherer); a large batch's are recorded at once. The windows are
/// counted on a clock the tests move: no time passes between two batches unless a test says so.
@Suite(.timeLimit(.minutes(1))) struct RecordGathererTests {
    let clock = ManualClock()

    /// Each delivery's state, in id order, and how many transactions recorded those no longer
    /// queued (their rows' xmin).
    static func recorded(_ f: WorkerFixture) async throws -> (states: [String], transactions: Int) {
        let row = try await f.db.query(
            """
            SELECT array_agg(state ORDER BY id), count(DISTINCT xmin::text) FILTER (WHERE state <> 'queued')
            FROM herald.deliveries
            """)[0]
        return (try row.decode(0, as: [String].self), try row.decode(1, as: Int.self))
    }

    /// Three deliveries for three devices, ingested, and a dispatch loop gathering records for
    /// `window`.
    func threeSends(window: Duration) async throws -> (WorkerFixture, DispatchWorker) {
        let f = try await WorkerFixture.make()
        for device in ["a", "b", "c"] {
            try await f.register(device, "android", user: device)
            try await f.db.execute("SELECT herald.send('shop', user_ref => '\(device)', title => 'hi')")
        }
        try await f.ingest()
        var context = f.context
        context.monotonicClock = clock.monotonic
        return (f, DispatchWorker(context: context, recordWindow: window))
    }

    @Test func recordsThatFollowCloselyAreHeldAndRecordedTogether() async throws {
        let (f, worker) = try await threeSends(window: .seconds(2))
        for _ in 0..<3 { #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1) }
        // All three sent; the first recorded at once (nothing came before it), the two after it
        // held: their leases are still there.
        #expect(await f.messages(to: "token-c").count == 1)
        #expect(try await Self.recorded(f).states == ["sent", "queued", "queued"])
        // A stopping loop records what it holds at once, without waiting out the window.
        #expect(await eventually { worker.recordGatherer?.windowWaitCount == 1 })
        await worker.finish()
        let after = try await Self.recorded(f)
        #expect(after.states == ["sent", "sent", "sent"])
        #expect(after.transactions == 2, "the two held outcomes in one record")
    }

    @Test func outcomesHeldAreRecordedWhenTheWindowEnds() async throws {
        let (f, worker) = try await threeSends(window: .seconds(1))
        for _ in 0..<2 { #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1) }
        #expect(try await Self.recorded(f).states == ["sent", "queued", "queued"])
        // The second is held until a window after the first's record, with no loop stopping.
        clock.advance(by: .milliseconds(999))
        #expect(try await Self.recorded(f).states == ["sent", "queued", "queued"])
        clock.advance(by: .milliseconds(1))
        await worker.inFlight.waitAll()
        #expect(try await Self.recorded(f).states == ["sent", "sent", "queued"], "recorded when the window ended")
        // Within a window of that record, the next would be held; a window after it, the next
        // is quiet again: recorded at once.
        clock.advance(by: .seconds(1))
        #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1)
        #expect(try await Self.recorded(f).states == ["sent", "sent", "sent"])
        await worker.finish()
    }

    /// Records of a few outcomes each are held until they fill a record; one that is not small
    /// is written at once, with what is held before it, in their order.
    @Test func heldOutcomesAreRecordedWhenTheyFillARecordOrALargerOneComes() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.db.execute(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'n' || n) FROM generate_series(1, 81) AS n")
        try await f.ingest()
        var context = f.context
        context.monotonicClock = clock.monotonic
        let worker = DispatchWorker(context: context, recordWindow: .seconds(2))
        func runs(_ batches: [Int]) async throws {
            for size in batches { #expect(try await worker.runBatch(limit: size, isStopping: { false }) == size) }
        }
        func sent() async throws -> Int { try await Self.recorded(f).states.filter { $0 == "sent" }.count }
        // One alone, recorded at once; then records of seven, held until they fill a record of
        // 64: the tenth, written with the nine before it.
        try await runs([1] + Array(repeating: 7, count: 9))
        #expect(try await sent() == 1)
        try await runs([7])
        #expect(try await sent() == 71)
        #expect(try await Self.recorded(f).transactions == 2)
        // One held, then a record of eight: written at once, the held one with it.
        try await runs([2])
        #expect(try await sent() == 71)
        try await runs([8])
        let recorded = try await Self.recorded(f)
        #expect(recorded.states == Array(repeating: "sent", count: 81))
        #expect(recorded.transactions == 3)
        await worker.finish()
    }

    /// What changes the next claims (a device to disable, a configuration found failing) is not
    /// held: a send to a dead token follows closely on another's record and is recorded at once,
    /// with the held outcome before it.
    @Test func aRecordThatDisablesADeviceIsWrittenAtOnce() async throws {
        let (f, worker) = try await threeSends(window: .seconds(2))
        await f.emulator.setBehaviour(.unregistered, forToken: "token-c")
        for _ in 0..<2 { #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1) }
        #expect(try await Self.recorded(f).states == ["sent", "queued", "queued"])
        #expect(try await worker.runBatch(limit: 1, isStopping: { false }) == 1)
        #expect(try await Self.recorded(f).states == ["sent", "sent", "token_invalid"])
        let disabled = try await f.db.query("SELECT disabled_cause FROM herald.devices WHERE device_id = 'c'")[0]
        #expect(try disabled.decode(0, as: String?.self) == "token_invalid")
        await worker.finish()
    }
}
