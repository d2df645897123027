import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import Synchronization
import Testing

@testable import HeraldWorkers

/// Deliveries leased at birth: ingest leases what the daemon's dispatch will take, and dispatch
/// sends them without claiming them again.
@Suite struct BirthLeaseTests {
    /// A fixture whose ingest and dispatch share `capacity` births, as a daemon's do.
    static func fixture(capacity: Int) async throws -> (WorkerFixture, WorkerContext, BirthLeases) {
        let f = try await WorkerFixture.make()
        let births = BirthLeases(capacity: capacity) {}
        var context = f.context
        context.births = births
        return (f, context, births)
    }

    /// Alice's two phones, a notification to her ingested at `at`, and its two deliveries leased
    /// at birth to daemon-a for 60 seconds (their ids).
    static func twoBirths(at: Date) async throws -> (WorkerFixture, [Int64]) {
        let f = try await WorkerFixture.make()
        for device in 1...2 { try await f.register("phone-\(device)", "android") }
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Now')")
        let leased = try await f.db.query(
            "SELECT leased FROM herald.ingest_next(10, $1, 'daemon-a', interval '60 seconds', 10)", [at]
        )[0].decode(0, as: [Int64].self)
        return (f, leased)
    }

    struct Row: Equatable {
        var device: String
        var state: String
        var lockedBy: String?
        var attempts: Int
        var runAt: Date?
    }

    static func rows(_ f: WorkerFixture) async throws -> [Row] {
        try await f.db.query(
            """
            SELECT v.device_id, d.state, d.locked_by, d.attempts, d.run_at
            FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id ORDER BY d.id
            """
        ).map {
            Row(
                device: try $0.decode(0), state: try $0.decode(1), lockedBy: try $0.decode(2, as: String?.self),
                attempts: try $0.decode(3), runAt: try $0.decode(4, as: Date?.self))
        }
    }

    @Test func ingestLeasesAndReadsWhatDispatchWillTakeAndDispatchSendsItWithoutAClaim() async throws {
        let (f, context, births) = try await Self.fixture(capacity: 3)
        for device in 1...5 { try await f.register("phone-\(device)", "android") }
        try await f.register("laptop", "android", user: "bob")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Now')")
        // Scheduled: not due, so not leased, whatever the room.
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'Later', send_at => now() + interval '1 hour')")

        let started = Date()
        #expect(try await IngestWorker(context: context).runBatch(limit: 10) { false } == 2)
        let born = try await Self.rows(f)
        let leased = born.filter { $0.lockedBy != nil }
        #expect(leased.map(\.device) == ["phone-1", "phone-2", "phone-3"], "the first three, up to the room")
        for row in leased {
            #expect(row.lockedBy == context.workerID && row.attempts == 1 && row.state == "queued")
            // Leased as a claim leases: until the ingest's time plus the lease.
            let runAt = try #require(row.runAt)
            #expect(runAt > started.addingTimeInterval(context.lease.seconds - 5))
            #expect(runAt < Date().addingTimeInterval(context.lease.seconds + 5))
        }
        #expect(born.filter { $0.lockedBy == nil }.allSatisfy { $0.attempts == 0 })
        #expect(births.room == 0)

        // One batch of 4: the three births, and 1 claimed from the queue.
        let dispatch = DispatchWorker(context: context)
        #expect(try await dispatch.runBatch(limit: 4) { false } == 4)
        #expect(births.room == 3)
        // (A loaded machine may leave the route to record on its own, a moment later.)
        let four = ["phone-1", "phone-2", "phone-3", "phone-4"]
        #expect(
            try await eventually(timeout: .seconds(60)) {
                try await Self.rows(f).filter { $0.state == "sent" }.map(\.device) == four
            })
        try await dispatch.drain()
        let sent = try await Self.rows(f)
        #expect(sent.filter { $0.state == "sent" }.count == 5)
        // A claim counts an attempt; those leased at birth had theirs at birth, and no other.
        #expect(sent.filter { $0.state == "sent" }.allSatisfy { $0.attempts == 1 && $0.lockedBy == nil })
        #expect(sent.first { $0.device == "laptop" }?.state == "queued")
        for device in 1...5 { #expect(await f.message(to: "token-phone-\(device)") != nil) }
    }

    /// Ingest wakes dispatch (every daemon's, through NOTIFY) only for deliveries a claim can
    /// take now: not for those leased at birth, already on their way to its own dispatch, nor
    /// for those scheduled later; a delivery over the room does wake it.
    @Test func deliveriesLeasedAtBirthWakeNoDispatch() async throws {
        let (f, context, _) = try await Self.fixture(capacity: 1)
        try await f.register("phone-1", "android")
        try await f.register("laptop", "android", user: "bob")
        let wakes = Mutex<[String]>([])
        let listener = PostgresListener(
            conninfo: f.database.conninfo, channels: [WakeHub.channel], logger: Logger(label: "test"),
            onNotification: { message in wakes.withLock { $0.append(message.payload) } })
        listener.start()
        defer { listener.stop() }
        let marker = "marker"
        func wakesUntilMarker() async throws -> [String] {
            try await f.db.query("SELECT pg_notify($1, $2)", [WakeHub.channel, marker])
            #expect(await eventually(timeout: .seconds(60)) { wakes.withLock { $0.contains(marker) } })
            return wakes.withLock { seen in
                defer { seen = [] }
                return seen.filter { $0 != marker && $0 != "ingest" }
            }
        }
        _ = try await wakesUntilMarker()

        // One delivery, leased at birth: no wake-up for dispatch.
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Now')")
        #expect(try await IngestWorker(context: context).runBatch(limit: 10) { false } == 1)
        #expect(try await Self.rows(f).map(\.lockedBy) == [context.workerID])
        #expect(try await wakesUntilMarker() == [])

        // Scheduled for later: nobody is woken either.
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'Later', send_at => now() + interval '1 hour')")
        #expect(try await IngestWorker(context: context).runBatch(limit: 10) { false } == 1)
        #expect(try await wakesUntilMarker() == [])

        // The room is taken: the next delivery is queued for any claim, and dispatch is woken.
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Again')")
        #expect(try await IngestWorker(context: context).runBatch(limit: 10) { false } == 1)
        #expect(try await wakesUntilMarker() == ["dispatch"])

        // Any other insert still wakes dispatch through the trigger.
        try await f.db.query(
            """
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind)
            SELECT notification_id, device_id, payload_kind FROM herald.deliveries ORDER BY id LIMIT 1
            """)
        #expect(try await wakesUntilMarker() == ["dispatch"])
    }

    @Test func leasesNotTakenAreGivenBackWhenDispatchStops() async throws {
        let (f, context, births) = try await Self.fixture(capacity: 10)
        for device in 1...3 { try await f.register("phone-\(device)", "android") }
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Now')")
        _ = try await IngestWorker(context: context).runBatch(limit: 10) { false }
        #expect(try await Self.rows(f).allSatisfy { $0.lockedBy == context.workerID })

        await DispatchWorker(context: context).finish()
        let given = try await Self.rows(f)
        #expect(given.allSatisfy { $0.lockedBy == nil && $0.attempts == 0 && $0.state == "queued" }, "\(given)")
        #expect(given.allSatisfy { ($0.runAt ?? .distantFuture) <= Date() }, "due now, for any daemon")
        // Once dispatch has stopped, ingest leases nothing more.
        #expect(births.room == 0)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'After')")
        _ = try await IngestWorker(context: context).runBatch(limit: 10) { false }
        #expect(try await Self.rows(f).allSatisfy { $0.lockedBy == nil })

        // Any dispatch sends them (here one without births: another daemon).
        try await f.dispatch()
        #expect(try await Self.rows(f).allSatisfy { $0.state == "sent" && $0.attempts == 1 })
    }

    /// The claim reads a held delivery only while its worker still holds it: one whose lease
    /// ran out is due for any claim (and counted as an attempt again), and one held by another
    /// worker is not read.
    @Test func aHeldDeliveryIsReadOnlyWhileItsLeaseLasts() async throws {
        let at = Date()
        let (f, leased) = try await Self.twoBirths(at: at)
        #expect(leased.count == 2)

        func claim(_ worker: String, at: Date) async throws -> [(id: Int64, attempts: Int, abandonedBy: String?)] {
            try await f.db.query(
                "SELECT delivery_id, attempts, abandoned_by FROM herald.claim_batch($1, 10, $2, interval '60 seconds', $3)",
                [at, worker, leased]
            ).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2, as: String?.self)) }
        }
        #expect(try await claim("daemon-b", at: at.addingTimeInterval(1)).isEmpty, "held by daemon-a")
        let read = try await claim("daemon-a", at: at.addingTimeInterval(1))
        #expect(read.map(\.id).sorted() == leased && read.allSatisfy { $0.attempts == 1 && $0.abandonedBy == nil })
        // Reading wrote nothing: the lease still ends where ingest set it.
        let runAts = try await f.db.query("SELECT DISTINCT run_at FROM herald.deliveries").map {
            try $0.decode(0, as: Date.self)
        }
        #expect(runAts.count == 1 && abs(runAts[0].timeIntervalSince(at) - 60) < 0.01)

        // With less than half its lease left, a birth is not read: it runs out and is claimed anew.
        #expect(try await claim("daemon-a", at: at.addingTimeInterval(31)).isEmpty)

        let rescued = try await claim("daemon-a", at: at.addingTimeInterval(61))
        #expect(rescued.map(\.id).sorted() == leased)
        #expect(rescued.allSatisfy { $0.attempts == 2 && $0.abandonedBy == "daemon-a" }, "claimed anew: \(rescued)")
        // Claimed anew by this daemon (another of its loops, sending them now), they are neither
        // read again as births nor given back as births.
        #expect(try await claim("daemon-a", at: at.addingTimeInterval(62)).isEmpty)
        try await f.db.query(BirthLeases.SQL.release, [leased, "daemon-a", at.addingTimeInterval(62)])
        let held = try await f.db.query(
            "SELECT count(*) FROM herald.deliveries WHERE locked_by = 'daemon-a' AND attempts = 2")
        #expect(try held[0].decode(0, as: Int.self) == 2)
    }

    /// A birth given back and then named as held to a claim that takes it from the queue (leased
    /// again, its first attempt again, to the same worker) is returned once, not also as a birth.
    @Test func aBirthGivenBackAndClaimedWhileHeldIsReturnedOnce() async throws {
        let at = Date()
        let (f, leased) = try await Self.twoBirths(at: at)
        try await f.db.query(BirthLeases.SQL.release, [leased, "daemon-a", at])
        let taken = try await f.db.query(
            "SELECT delivery_id, attempts FROM herald.claim_batch($1, 10, 'daemon-a', interval '60 seconds', $2)",
            [at.addingTimeInterval(1), leased]
        ).map { (try $0.decode(0, as: Int64.self), try $0.decode(1, as: Int.self)) }
        #expect(taken.map(\.0).sorted() == leased, "each once: \(taken)")
        #expect(taken.allSatisfy { $0.1 == 1 })
    }

    /// Room is promised to ingest statements up to their batch, so two ingest loops running at
    /// once share it and cannot both fill the same room; a statement's hand-over settles its
    /// promise, whether it leased anything or failed.
    @Test func theRoomIsSharedByIngestStatementsUpToTheirBatch() async throws {
        let births = BirthLeases(capacity: 10) {}
        let born = Self.births(1...4)
        #expect(births.reserve(upTo: 6) == 6)
        #expect(births.reserve(upTo: 6) == 4, "the second statement running at once gets the rest")
        #expect(births.reserve(upTo: 6) == 0, "a third finds none")
        #expect(births.hand(Array(born[0..<3]), reserved: 6, leasedAt: .now).isEmpty)
        #expect(births.room == 3, "10, less the 3 held and the 4 still promised")
        _ = births.hand([], reserved: 4, leasedAt: .now)
        #expect(births.room == 7, "a failed statement gives its room back")
        #expect(births.take(upTo: 2, fresh: .seconds(60)).births == [1, 2])
        #expect(births.room == 9)
        #expect(births.close() == [3])
        #expect(births.room == 0 && births.reserve(upTo: 6) == 0)
        #expect(births.hand([born[3]], reserved: 0, leasedAt: .now) == [4], "refused once dispatch has stopped")
    }

    /// A birth is sent only while half its lease is left, as a claim would take it: one that
    /// waited longer comes back to be given back.
    @Test func aBirthThatWaitedTooLongIsNotSentFromHere() async throws {
        let births = BirthLeases(capacity: 10) {}
        let born = Self.births(1...3)
        _ = births.hand(Array(born[0..<2]), reserved: 0, leasedAt: .now - .seconds(31))
        _ = births.hand([born[2]], reserved: 0, leasedAt: .now)
        let taken = births.take(upTo: 10, fresh: .seconds(30))
        #expect(taken.births == [3])
        #expect(taken.stale == [1, 2])
        #expect(births.room == 10, "the stale ones hold no room")
    }

    /// A batch that holds births claims from the queue too only when it is told deliveries are
    /// queued (a NOTIFY), when the claim before it came back full, or when it has not claimed for
    /// a poll interval (retries and scheduled sends come due without a NOTIFY): at a trickle, a
    /// commit costs no claim.
    @Test func aBatchHoldingBirthsClaimsFromTheQueueOnlyWhenThereIsWork() async throws {
        let f = try await WorkerFixture.make()
        let births = BirthLeases(capacity: 1, queuePollInterval: .seconds(600)) {}
        var context = f.context
        context.births = births
        try await f.register("phone", "android")
        for laptop in 1...4 { try await f.register("laptop-\(laptop)", "android", user: "bob") }
        let ingest = IngestWorker(context: context)
        let dispatch = DispatchWorker(context: context)
        func send(_ user: String, _ title: String) async throws {
            _ = try await f.db.query("SELECT herald.send('shop', user_ref => $1, title => $2)", [user, title])
            #expect(try await ingest.runBatch(limit: 10) { false } == 1)
        }
        func sentToBob() async -> Int {
            await dispatch.inFlight.waitAll()
            var count = 0
            for laptop in 1...4 where await f.message(to: "token-laptop-\(laptop)") != nil { count += 1 }
            return count
        }
        #expect(try await dispatch.runBatch(limit: 4) { false } == 0, "the first batch claims, and finds nothing")

        // Alice's delivery is leased at birth (the room is one), Bob's four are queued.
        try await send("alice", "One")
        try await send("bob", "Two")
        #expect(try await dispatch.runBatch(limit: 4) { false } == 1, "the birth alone")
        // The send may still be in flight when runBatch returns.
        await dispatch.inFlight.waitAll()
        #expect(await f.message(to: "token-phone") != nil)
        #expect(await sentToBob() == 0)

        // Told, a batch holding a birth claims its share of the queue: three of Bob's, a full
        // claim, so the next batch claims again.
        births.queueSignalled()
        try await send("alice", "Three")
        #expect(try await dispatch.runBatch(limit: 4) { false } == 4)
        #expect(await sentToBob() == 3)
        try await send("alice", "Four")
        #expect(try await dispatch.runBatch(limit: 4) { false } == 2, "the birth, and Bob's last")
        #expect(await sentToBob() == 4)

        // A poll interval after the last claim, a batch holding births claims too.
        let clock = ManualClock()
        let polling = BirthLeases(capacity: 1, queuePollInterval: .seconds(1), clock: clock.monotonic) {}
        #expect(polling.claimsQueue(holding: false), "a batch holding none claims")
        #expect(!polling.claimsQueue(holding: true), "holding births, just after a claim")
        clock.advance(by: .milliseconds(999))
        #expect(!polling.claimsQueue(holding: true), "holding births, within a poll interval")
        clock.advance(by: .milliseconds(1))
        #expect(polling.claimsQueue(holding: true), "holding births, a poll interval after")
        #expect(!polling.claimsQueue(holding: true))
    }

    /// Births to hand over: their ids, as ingest's statement returns them.
    static func births(_ ids: ClosedRange<Int64>) -> [Int64] { Array(ids) }
}
