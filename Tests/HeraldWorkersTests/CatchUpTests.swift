import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Synchronization
import Testing

/// Catch-up on Android: Herald never lets FCM's store for an offline phone overflow (100
/// messages, past which FCM drops them all), holds the rest with a reason, sends one catch-up
/// message, and lets the app fetch what it missed page by page. Against a real database and the
/// emulator, which models FCM's store for the phone (``FCMDevice``).
@Suite struct CatchUpTests {
    static let token = "token-pixel"

    /// A phone `pixel` whose app has reported a delivery, so its store is counted.
    func reportingPhone() async throws -> WorkerFixture {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        await f.emulator.setFCMDevice(Self.token, online: true)
        try await send(f, titles: ["hello"])
        let first = try #require(await f.emulator.fcmDevice(Self.token)?.received.first)
        try await report(f, [first])
        try await f.reconcile()
        return f
    }

    /// Sends each title to `pixel`, 50 a dispatch: a batch larger than FCM's route window
    /// postpones a few sends by moments, which a drain's next batch would miss.
    func send(_ f: WorkerFixture, titles: [String], collapseKey: String? = nil) async throws {
        for chunk in stride(from: 0, to: titles.count, by: 50).map({ titles[$0..<min($0 + 50, titles.count)] }) {
            for title in chunk {
                _ = try await f.db.query(
                    "SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => $1, collapse_key => $2)",
                    [title, collapseKey])
            }
            try await f.ingest()
            try await f.dispatch()
        }
    }

    func report(_ f: WorkerFixture, _ messages: [ReceivedMessage]) async throws {
        for message in messages {
            let reference = try #require(Self.data(message)["herald_report"])
            let outcome = try await f.db.query(
                "SELECT outcome FROM herald.report_delivery($1, 'delivered', 'pixel')", [reference])[0].decode(
                    0, as: String.self)
            #expect(outcome == "accepted")
        }
    }

    static func data(_ message: ReceivedMessage) -> [String: String] {
        message.message["data"] as? [String: String] ?? [:]
    }

    func count(_ f: WorkerFixture, _ condition: String) async throws -> Int {
        try await f.db.query("SELECT count(*) FROM herald.deliveries d WHERE \(condition)")[0].decode(0, as: Int.self)
    }

    @Test func anOfflinePhoneSeesAll150WhenItComesBackAndFCMDropsNone() async throws {
        let f = try await reportingPhone()
        let producer = try await f.producer()
        await f.emulator.setFCMDevice(Self.token, online: false)
        let titles = (1...150).map { "Order \($0)" }
        try await send(f, titles: Array(titles[..<60]))
        try await send(f, titles: Array(titles[60...]))

        // FCM holds 80 for the phone, the most Herald lets it; the other 70 wait in Herald, with
        // the reason, and the phone has one catch-up message waiting beside them.
        let phone = try #require(await f.emulator.fcmDevice(Self.token))
        #expect(phone.storedCount == 80)
        #expect(try await count(f, "d.state = 'queued' AND d.held_since IS NOT NULL") == 70)
        let reason = try await f.db.query(
            "SELECT DISTINCT last_error FROM herald.deliveries WHERE held_since IS NOT NULL")[0].decode(
                0, as: String.self)
        #expect(reason.hasPrefix("held: FCM's store for this device holds 80 messages the app has not reported"))
        let sent = await f.emulator.received.filter { $0.target == Self.token }
        #expect(sent.count == 1 + 80 + 1, "the first, 80 of the 150, and one catch-up message")

        // Back online: it gets all FCM kept, and no onDeletedMessages.
        await f.emulator.setFCMDevice(Self.token, online: true)
        let received = try #require(await f.emulator.fcmDevice(Self.token)).received.dropFirst()
        #expect(await f.emulator.fcmDevice(Self.token)?.deletedNotices == 0)
        let catchUps = received.filter { Self.data($0)["herald_catch_up"] == "1" }
        #expect(catchUps.count == 1)
        let catchUp = try #require(catchUps.first?.message)
        #expect((catchUp["android"] as? [String: Any])?["collapse_key"] as? String == "herald_catch_up")
        #expect((catchUp["data"] as? [String: String])?["herald_silent"] == "1")
        #expect(catchUp["notification"] == nil)

        // The app reports what it was handed, and the catch-up message makes it fetch the rest,
        // 50 a page.
        let pushed = received.filter { Self.data($0)["herald_catch_up"] == nil }
        try await report(f, Array(pushed))
        var fetched: [String] = []
        var after: Int64? = nil
        var pages = 0
        repeat {
            let page = try await producer.query(
                "SELECT cursor, title FROM herald.missed_notifications('shop', 'pixel', $1, 50)", [after])
            fetched += try page.map { try $0.decode(1, as: String.self) }
            after = try page.last?.decode(0, as: Int64.self) ?? after
            pages += 1
            if page.isEmpty { break }
        } while true
        #expect(pages == 3, "50, 20, then none (the last call marks the second page)")
        try await f.reconcile()
        try await f.dispatch()

        let shown = pushed.compactMap { Self.data($0)["title"] } + fetched
        #expect(shown.sorted() == titles.sorted(), "each of the 150 once")
        #expect(await f.emulator.received.filter { $0.target == Self.token }.count == 82, "nothing sent again")
        #expect(try await count(f, "d.fetched_at IS NOT NULL AND d.state = 'delivered'") == 70)
        #expect(try await count(f, "d.state NOT IN ('delivered', 'sent')") == 0)
        #expect(await f.emulator.fcmDevice(Self.token)?.deletedNotices == 0)
    }

    @Test func aReportReleasesWhatWaitsAsTheStoreHasRoom() async throws {
        let f = try await reportingPhone()
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: (1...100).map { "Order \($0)" })
        #expect(try await count(f, "d.held_since IS NOT NULL") == 20)

        await f.emulator.setFCMDevice(Self.token, online: true)
        let handed = try #require(await f.emulator.fcmDevice(Self.token)).received.dropFirst()
            .filter { Self.data($0)["herald_catch_up"] == nil }
        #expect(handed.count == 80)
        // The app reports the first ten: room for ten more of those held, oldest first.
        try await report(f, Array(handed.prefix(10)))
        try await f.reconcile()
        try await f.dispatch()
        #expect(try await count(f, "d.held_since IS NOT NULL") == 10)
        let released = try #require(await f.emulator.fcmDevice(Self.token)).received.suffix(10)
        #expect(released.compactMap { Self.data($0)["title"] }.sorted() == (81...90).map { "Order \($0)" }.sorted())
        try await report(f, Array(handed.dropFirst(10)) + Array(released))
        try await f.reconcile()
        try await f.dispatch()
        #expect(try await count(f, "d.state = 'queued'") == 0)
        #expect(try await count(f, "d.state = 'sent' AND d.payload_kind = 'android_data'") == 10)
    }

    @Test func whatIsStillHeldAtItsExpiryEndsExpired() async throws {
        let f = try await reportingPhone()
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: (1...80).map { "Order \($0)" })
        _ = try await f.db.query(
            "SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'Flash sale', ttl => interval '2 seconds')"
        )
        try await f.ingest()
        try await f.dispatch()
        #expect(try await count(f, "d.held_since IS NOT NULL AND d.state = 'queued'") == 1)
        // It is held until its expiry, two seconds on. They pass: the rows' times move into the
        // past (the claim compares them with the database's now()) rather than the test waiting.
        let expiry = try await f.db.query(
            """
            SELECT extract(epoch FROM n.expires_at - n.created_at)::float8, d.run_at = n.expires_at
            FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id
            WHERE d.held_since IS NOT NULL
            """)[0]
        #expect(try expiry.decode(0, as: Double.self) == 2)
        #expect(try expiry.decode(1, as: Bool.self), "held until it expires")
        try await f.db.execute(
            """
            UPDATE herald.notifications SET expires_at = now() - interval '1 millisecond' WHERE title = 'Flash sale';
            UPDATE herald.deliveries SET run_at = now() - interval '1 millisecond' WHERE held_since IS NOT NULL;
            """)
        try await f.dispatch()
        let held = try await f.db.query(
            "SELECT state, last_error FROM herald.deliveries WHERE held_since IS NOT NULL OR state = 'expired'")
        #expect(held.count == 1)
        #expect(try held.first?.decode(0, as: String.self) == "expired")
        #expect(try held.first?.decode(1, as: String.self).hasPrefix("expired at") == true)
        #expect(await f.emulator.received.filter { $0.target == Self.token }.count == 1 + 80 + 1)
    }

    @Test func anAppThatNeverReportsIsNotCountedAndFCMDropsItsOverflow() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: (1...101).map { "Order \($0)" })
        #expect(try await count(f, "d.state = 'sent'") == 101, "nothing held: there is nothing to count by")
        await f.emulator.setFCMDevice(Self.token, online: true)
        let phone = try #require(await f.emulator.fcmDevice(Self.token))
        #expect(phone.received.isEmpty, "FCM dropped the 100 it stored when the 101st came, and that one")
        #expect(phone.deletedNotices == 1)
    }

    @Test func collapsibleNotificationsTakeNoRoomInTheStore() async throws {
        let f = try await reportingPhone()
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: (1...90).map { "Score \($0)" }, collapseKey: "score")
        #expect(try await count(f, "d.held_since IS NOT NULL") == 0)
        await f.emulator.setFCMDevice(Self.token, online: true)
        #expect(try await count(f, "d.state = 'sent'") == 90)
        // FCM kept one of them (sent at once, they arrive in any order).
        #expect(await f.emulator.fcmDevice(Self.token)?.received.count == 2)
    }

    /// Two ingesters filling the same phone's store at once: the second counts after the first
    /// commits, so the store never holds more than its capacity.
    @Test func concurrentIngestersNeverOverfillAStore() async throws {
        let f = try await reportingPhone()
        _ = try await f.db.query(
            "SELECT herald.send('shop', device_ids => ARRAY['pixel'], title => 'n' || i) FROM generate_series(1, 160) i"
        )
        let first = try await f.database.connect()
        let second = try await f.database.connect()
        let secondPID = try await second.query("SELECT pg_backend_pid()")[0].decode(0, as: Int32.self)
        let ingest = "SELECT deliveries FROM herald.ingest_next(80, now(), NULL, NULL, 0, interval '30 minutes')"
        try await first.execute("BEGIN")
        #expect(try await first.query(ingest)[0].decode(0, as: Int.self) == 80)
        let ended = Mutex(false)
        let waiting = Task {
            defer { ended.withLock { $0 = true } }
            return try await second.query(ingest)[0].decode(0, as: Int.self)
        }
        // The second waits for the device's lock the first holds (ingest_next waits half a
        // second at most for a lock; should the first commit later than that on a busy machine,
        // or this look later, the second gives up, changes nothing, and is run again).
        #expect(
            try await eventually {
                try await f.db.query(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", [secondPID]
                )
                .first?.decode(0, as: Bool?.self) == true || ended.withLock { $0 }
            })
        try await first.execute("COMMIT")
        do {
            #expect(try await waiting.value == 80)
        } catch let error as PostgresError where error.isLockTimeout {
            #expect(try await second.query(ingest)[0].decode(0, as: Int.self) == 80)
        }
        #expect(try await count(f, "d.state = 'queued' AND d.stored_until IS NOT NULL") == 80)
        #expect(try await count(f, "d.held_since IS NOT NULL") == 80)
        #expect(try await count(f, "d.payload_kind = 'android_wakeup'") == 1, "one catch-up message")
    }

    @Test func theFetchIsTheProducersOwnAppsAndSaysWhatIsWrong() async throws {
        let f = try await reportingPhone()
        let producer = try await f.producer()
        try await f.db.addApp("other", fcmProject: "other-prod")
        _ = try await f.db.query("SELECT herald.register_device('other', 'pixel', 'android', 'token-other')")
        do {
            _ = try await producer.query("SELECT * FROM herald.missed_notifications('other', 'pixel')")
            Issue.record("another app's device was fetched for")
        } catch let error as PostgresError {
            #expect("\(error)".contains("may not act for app 'other'"))
        }
        do {
            _ = try await producer.query("SELECT * FROM herald.missed_notifications('shop', 'tablet')")
            Issue.record("an unknown device was fetched for")
        } catch let error as PostgresError {
            #expect("\(error)".contains("app 'shop' has no device 'tablet'"))
        }
        do {
            _ = try await producer.query("SELECT * FROM herald.missed_notifications('shop', 'pixel', max_count => 101)")
            Issue.record("a page of 101 was fetched")
        } catch let error as PostgresError {
            #expect("\(error)".contains("max_count must be from 1 to 100"))
        }
        // A page whose answer was lost comes back: nothing is marked until the app asks past it.
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: ["a", "b"])
        let page = "SELECT cursor, title FROM herald.missed_notifications('shop', 'pixel', $1)"
        let lost = try await producer.query(page, [Int64?.none]).map { try $0.decode(1, as: String.self) }
        let again = try await producer.query(page, [Int64?.none])
        #expect(lost == ["a", "b"])
        #expect(try again.map { try $0.decode(1, as: String.self) } == lost)
        let last = try again[1].decode(0, as: Int64.self)
        #expect(try await producer.query(page, [last]).isEmpty)
        #expect(try await producer.query(page, [Int64?.none]).isEmpty, "fetched once, never again")

        // A device that logged out fetches nothing, not even its user's.
        _ = try await producer.query("SELECT herald.unregister_device('shop', 'pixel')")
        do {
            _ = try await producer.query(page, [Int64?.none])
            Issue.record("a device that logged out was fetched for")
        } catch let error as PostgresError {
            #expect("\(error)".contains("device 'pixel' logged out"))
        }
    }

    /// What the app fetched is not sent as well: a report from the device releases only what it
    /// has not fetched, and asking past the page marks the page delivered.
    @Test func aFetchedNotificationIsNotReleasedToBeSent() async throws {
        let f = try await reportingPhone()
        let producer = try await f.producer()
        await f.emulator.setFCMDevice(Self.token, online: false)
        try await send(f, titles: (1...85).map { "Order \($0)" })
        #expect(try await count(f, "d.held_since IS NOT NULL AND d.state = 'queued'") == 5)
        let page = try await producer.query("SELECT cursor, title FROM herald.missed_notifications('shop', 'pixel')")
        #expect(page.count == 85, "80 sent and unreported, 5 held")

        await f.emulator.setFCMDevice(Self.token, online: true)
        let handed = try #require(await f.emulator.fcmDevice(Self.token)).received.dropFirst()
            .filter { Self.data($0)["herald_catch_up"] == nil }
        try await report(f, Array(handed))
        try await f.reconcile()
        try await f.dispatch()
        #expect(try await count(f, "d.held_since IS NOT NULL AND d.state = 'queued'") == 5, "fetched: not released")
        let last = try #require(try page.last?.decode(0, as: Int64.self))
        #expect(
            try await producer.query("SELECT * FROM herald.missed_notifications('shop', 'pixel', $1)", [last]).isEmpty)
        #expect(try await count(f, "d.state = 'queued'") == 0)
        #expect(try await count(f, "d.fetched_at IS NOT NULL AND d.state = 'delivered'") == 85)
        #expect(await f.emulator.received.filter { $0.target == Self.token }.count == 1 + 80 + 1)
    }
}
