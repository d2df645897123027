import Foundation
import HeraldCrypto
import HeraldFCM
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Testing

/// Delivery reports and silent wake-ups, against a real database, the FCM emulator and an
/// injected clock.
@Suite struct ReconcileTests {
    /// Sends `count` alerts to `device` at the clock's time and returns their payloads' references, oldest first.
    func sendAlerts(_ f: WorkerFixture, to device: String, count: Int, title: String) async throws -> [String] {
        let before = await f.messages(to: "token-\(device)").count
        for index in 1...count {
            _ = try await f.db.query(
                "SELECT herald.send('shop', device_ids => ARRAY[$1], title => $2)", [device, "\(title) \(index)"])
        }
        try await f.ingest()
        try await f.dispatch()
        // Sends of one batch go out concurrently and arrive in any order: oldest first is by
        // notification id.
        let sent = await f.messages(to: "token-\(device)").dropFirst(before)
        return sent.sorted { Self.notificationID(in: $0) < Self.notificationID(in: $1) }.compactMap(Self.reference(in:))
    }

    static func notificationID(in message: [String: Any]) -> Int {
        let data = message["data"] as? [String: String]
        let payload = (message["apns"] as? [String: Any])?["payload"] as? [String: Any]
        return Int(data?["herald_notification_id"] ?? payload?["herald_notification_id"] as? String ?? "") ?? 0
    }

    static func reference(in message: [String: Any]) -> String? {
        if let data = message["data"] as? [String: String] { return data["herald_report"] }
        let payload = (message["apns"] as? [String: Any])?["payload"] as? [String: Any]
        return payload?["herald_report"] as? String
    }

    func report(_ f: WorkerFixture, _ reference: String, device: String? = nil, kind: String = "delivered")
        async throws -> (outcome: String, message: String)
    {
        let row = try await f.db.query(
            "SELECT outcome, message FROM herald.report_delivery($1, $2, $3)", [reference, kind, device])[0]
        return (try row.decode(0), try row.decode(1))
    }

    func wakeups(_ f: WorkerFixture, to device: String) async -> [[String: Any]] {
        await f.messages(to: "token-\(device)").filter {
            (($0["apns"] as? [String: Any])?["headers"] as? [String: String])?["apns-push-type"] == "background"
        }
    }

    func pending(_ f: WorkerFixture, _ reference: String) async throws -> [(
        title: String, reference: String, sentAt: Date
    )] {
        try await f.db.query(
            "SELECT title, report_reference, sent_at FROM herald.pending_notifications($1)", [reference]
        ).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2)) }
    }

    @Test func anOfflineIPhoneGetsOneWakeUpAndFetchesWhatItMissed() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("iphone", "ios")
        let references = try await sendAlerts(f, to: "iphone", count: 5, title: "Order")
        try #require(references.count == 5)

        // The phone comes back online; APNs hands it only the newest, which it reports.
        clock.advance(by: .seconds(300))
        #expect(try await report(f, references[4], device: "iphone").outcome == "accepted")
        try await f.reconcile()
        try await f.dispatch()

        let woken = await wakeups(f, to: "iphone")
        #expect(woken.count == 1)
        let apns = try #require(woken.first?["apns"] as? [String: Any])
        let headers = try #require(apns["headers"] as? [String: String])
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-priority"] == "5")
        let payload = try #require(apns["payload"] as? [String: Any])
        #expect((payload["aps"] as? [String: Int]) == ["content-available": 1])
        #expect(woken.first?["notification"] == nil)
        #expect(try await f.delivery(of: "iphone").state == "sent", "the wake-up is recorded like any delivery")

        // The woken app fetches with the wake-up's own reference: the four it missed, newest
        // first (by when each was sent: one batch's sends go out together, and are answered in
        // any order).
        let wakeupReference = try #require(payload["herald_report"] as? String)
        let missed = try await pending(f, wakeupReference)
        #expect(missed.map(\.title).sorted() == ["Order 1", "Order 2", "Order 3", "Order 4"])
        #expect(missed.map(\.sentAt) == missed.map(\.sentAt).sorted(by: >), "newest first")
        let delivered = try await f.db.query(
            "SELECT count(*) FROM herald.deliveries WHERE state = 'delivered' AND delivered_at IS NOT NULL")[0].decode(
                0, as: Int.self)
        #expect(delivered == 1)

        // It shows them and reports each: nothing is pending any more, and no new wake-up follows.
        for item in missed { #expect(try await report(f, item.reference).outcome == "accepted") }
        try await f.reconcile()
        #expect(try await pending(f, wakeupReference).isEmpty)
        try await f.dispatch()
        #expect(await wakeups(f, to: "iphone").count == 1)
    }

    @Test func oneWakeUpPerQuietPeriodThenAnotherForANewGap() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("iphone", "ios")
        /// Some alerts go unreported while the phone is away; two minutes later it reports the newest.
        func gap(_ title: String) async throws -> Int {
            let references = try await sendAlerts(f, to: "iphone", count: 3, title: title)
            clock.advance(by: .seconds(120))
            _ = try await report(f, references[2])
            try await f.reconcile()
            try await f.dispatch()
            return await wakeups(f, to: "iphone").count
        }
        #expect(try await gap("First") == 1)
        // Ten minutes later another gap: within 30 minutes, so no second wake-up.
        clock.advance(by: .seconds(600))
        #expect(try await gap("Second") == 1)
        // After the quiet period, a new gap wakes it once more.
        clock.advance(by: .seconds(1800))
        #expect(try await gap("Third") == 2)
        let stored = try await f.db.query("SELECT count(*) FROM herald.recent_wakeups WHERE device_id = 'iphone'")[0]
            .decode(0, as: Int.self)
        #expect(stored == 2)
    }

    @Test func twoDaemonsReconcilingAtOnceSendOneWakeUp() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("iphone", "ios")
        let references = try await sendAlerts(f, to: "iphone", count: 5, title: "Order")
        clock.advance(by: .seconds(300))
        // Two reports for the same device, each applied by a different daemon at the same moment.
        _ = try await report(f, references[3])
        _ = try await report(f, references[4])
        let jobs = try await f.db.query(
            "SELECT id, ref FROM herald.jobs WHERE kind = 'reconcile' ORDER BY id"
        ).map { Job(id: try $0.decode(0), kind: "reconcile", ref: try $0.decode(1)) }
        #expect(jobs.count == 2)
        let daemons = try await (0..<2).asyncMap { _ in
            var context = f.context
            context.connection = try await f.database.connect()
            return ReconcileWorker(context: context)
        }
        async let first = daemons[0].handle([jobs[0]])
        async let second = daemons[1].handle([jobs[1]])
        let outcomes = await [first, second]
        #expect(outcomes.allSatisfy { $0.values.allSatisfy { $0 == JobOutcome.completed } })
        try await f.db.query("DELETE FROM herald.jobs WHERE kind = 'reconcile'")
        try await f.dispatch()
        #expect(await wakeups(f, to: "iphone").count == 1)

        // The rule holds in the database itself, whoever inserts.
        let device = try await f.db.query("SELECT id FROM herald.devices WHERE device_id = 'iphone'")[0].decode(
            0, as: Int64.self)
        await #expect(throws: PostgresError.self) {
            try await f.db.query(
                "INSERT INTO herald.wakeups (device_id, missed, created_at, quiet_until) VALUES ($1, 1, $2, $2::timestamptz + interval '30 minutes')",
                [device, clock.now()])
        }
    }

    /// A batch that fails for a reason not its own (here a lock timeout, as retirement may hold
    /// the reports) is tried again without spending an attempt: such failures never kill it.
    @Test func aTransientFailureSpendsNoAttempt() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("iphone", "ios")
        let references = try await sendAlerts(f, to: "iphone", count: 1, title: "Order")
        _ = try await report(f, references[0])
        let jobs = try await f.db.query("SELECT id, ref FROM herald.jobs WHERE kind = 'reconcile'").map {
            Job(id: try $0.decode(0), kind: "reconcile", ref: try $0.decode(1))
        }
        var context = f.context
        context.connection = try await f.database.connect()
        try await context.connection.execute("SET lock_timeout = '100ms'")
        let holder = try await f.database.connect()
        try await holder.execute("BEGIN; LOCK TABLE herald.delivery_reports IN ACCESS EXCLUSIVE MODE")
        let failed = await ReconcileWorker(context: context).handle(jobs)
        try await holder.execute("COMMIT")
        guard case .postpone = failed[jobs[0].id] else {
            Issue.record("a transient failure must postpone the job: \(String(describing: failed[jobs[0].id]))")
            return
        }
        try await context.connection.execute("RESET lock_timeout")
        let applied = await ReconcileWorker(context: context).handle(jobs)
        #expect(applied[jobs[0].id] == .completed)
    }

    @Test func forgedWrongDeviceUnknownAndRepeatedReportsChangeNothing() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("iphone", "ios")
        try await f.register("pixel", "android", user: "bob")
        let reference = try #require(try await sendAlerts(f, to: "iphone", count: 1, title: "Hi").first)

        var forged = Array(reference)
        forged[5] = forged[5] == "A" ? "B" : "A"
        #expect(try await report(f, String(forged)).outcome == "invalid_reference")
        #expect(try await report(f, "not-a-reference").outcome == "invalid_reference")
        #expect(try await report(f, reference, device: "pixel").outcome == "wrong_device")
        let unknown = try await f.db.query(
            "SELECT herald.delivery_reference(999999, id) FROM herald.devices WHERE device_id = 'iphone'")[0].decode(
                0, as: String.self)
        #expect(try await report(f, unknown).outcome == "unknown_delivery")
        #expect(try await report(f, reference, kind: "clicked").outcome == "invalid_kind")
        let nothing = try await f.db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(0, as: Int.self)
        #expect(nothing == 0)
        #expect(try await f.delivery(of: "iphone").state == "sent")

        #expect(try await report(f, reference, device: "iphone").outcome == "accepted")
        let replay = try await report(f, reference, device: "iphone")
        #expect(replay.outcome == "already_reported")
        #expect(replay.message.contains("already reported"))
        #expect(try await report(f, reference, kind: "opened").outcome == "accepted")
        try await f.reconcile()
        let row = try await f.db.query(
            "SELECT state, delivered_at IS NOT NULL, seen_at IS NOT NULL, opened_at IS NOT NULL FROM herald.deliveries")[
                0]
        #expect(try row.decode(0, as: String.self) == "delivered")
        #expect(try row.decode(1, as: Bool.self) && row.decode(2, as: Bool.self) && row.decode(3, as: Bool.self))

        // The pending fetch refuses what is not this device's.
        await #expect(throws: PostgresError.self) { _ = try await pending(f, String(forged)) }
        await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT * FROM herald.pending_notifications($1, device => 'pixel')", [reference])
        }
    }

    @Test func anAndroidReportNeverWakes() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("pixel", "android")
        let references = try await sendAlerts(f, to: "pixel", count: 3, title: "Hi")
        clock.advance(by: .seconds(600))
        #expect(try await report(f, references[2]).outcome == "accepted")
        try await f.reconcile()
        try await f.dispatch()
        #expect(await f.messages(to: "token-pixel").count == 3)
        let wakeups = try await f.db.query("SELECT count(*) FROM herald.wakeups")[0].decode(0, as: Int.self)
        #expect(wakeups == 0)
    }

    @Test func sqlAndSwiftMakeTheSameReferences() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await f.db.query("SELECT value FROM herald.secrets WHERE name = 'report_hmac'")[0].decode(
            0, as: Data.self)
        let swift = DeliveryReference(secret: [UInt8](secret))
        for (delivery, device) in [(Int64(1), Int64(1)), (42, 7), (Int64.max, 123_456_789_012)] {
            let sql = try await f.db.query("SELECT herald.delivery_reference($1, $2)", [delivery, device])[0].decode(
                0, as: String.self)
            #expect(sql == swift.make(deliveryID: delivery, deviceID: device))
            let opened = try await f.db.query("SELECT * FROM herald.open_reference($1)", [sql])[0]
            #expect(try opened.decode(0, as: Int64.self) == delivery)
            #expect(try opened.decode(1, as: Int64.self) == device)
        }
    }

    /// A reference reads only the registration that received it (issue #40): `shared-tab` is
    /// alice's, then logged out and registered for bob. Alice's old reference reads neither bob's
    /// notifications nor her own any more; bob's reads only his; a reference whose delivery is
    /// gone reads nothing. As a producer logged in as itself.
    @Test func aReferenceReadsOnlyTheRegistrationThatReceivedIt() async throws {
        let f = try await WorkerFixture.make()
        let producer = try await f.producer()
        func pending(_ reference: String) async throws -> [String] {
            try await producer.query("SELECT title FROM herald.pending_notifications($1)", [reference]).map {
                try $0.decode(0, as: String.self)
            }
        }
        try await producer.query(
            "SELECT herald.register_device('shop', 'shared-tab', 'android', 'token-shared-tab', 'alice')")
        let alices = try await sendAlerts(f, to: "shared-tab", count: 1, title: "alice's reset code")
        let alice = try #require(alices.first)
        #expect(try await pending(alice) == ["alice's reset code 1"])
        // Her token refreshed: the same registration, the reference still reads.
        try await producer.query(
            "SELECT herald.register_device('shop', 'shared-tab', 'android', 'token-shared-tab', 'alice')")
        #expect(try await pending(alice) == ["alice's reset code 1"])

        try await producer.query("SELECT herald.unregister_device('shop', 'shared-tab')")
        let loggedOut = await #expect(throws: PostgresError.self) { try await pending(alice) }
        #expect(loggedOut?.sqlState == "28000", "\(String(describing: loggedOut))")

        try await producer.query(
            "SELECT herald.register_device('shop', 'shared-tab', 'android', 'token-shared-tab', 'bob')")
        let bobs = try await sendAlerts(f, to: "shared-tab", count: 1, title: "bob's bank notice")
        let bob = try #require(bobs.first)
        let stale = await #expect(throws: PostgresError.self) { try await pending(alice) }
        #expect(stale?.sqlState == "28000", "\(String(describing: stale))")
        #expect(stale?.message.contains("no longer valid") == true, "\(String(describing: stale))")
        #expect(try await pending(bob) == ["bob's bank notice 1"], "not alice's history")

        // A reference lives only as long as its delivery.
        try await f.db.query(
            "DELETE FROM herald.deliveries WHERE notification_id IN (SELECT id FROM herald.notifications WHERE title LIKE 'bob%')"
        )
        let pruned = await #expect(throws: PostgresError.self) { try await pending(bob) }
        #expect(pruned?.sqlState == "28000", "\(String(describing: pruned))")
    }
}

extension ManualClock {
    /// A clock a little ahead of PostgreSQL's, so jobs that producers enqueue at `now()` are due.
    static func aheadOfTheDatabase() -> ManualClock { ManualClock(Date().addingTimeInterval(60)) }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
