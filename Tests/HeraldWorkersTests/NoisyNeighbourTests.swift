import Foundation
import HeraldCore
import HeraldPostgres
import HeraldStatus
import HeraldTestSupport
import HeraldWorkers
import Logging
import Synchronization
import Testing

/// What one app's producer can do to another's notifications, tried as an attacker would: a real
/// producer login granted app `evil` only, beside the fixture's app `shop`.
@Suite struct NoisyNeighbourTests {
    /// The fixture, and a producer login that acts for app `evil` only.
    static func shopAndAnEvilProducer(clock: any WallClock = SystemClock()) async throws -> (
        WorkerFixture, PostgresConnection
    ) {
        let f = try await WorkerFixture.make(clock: clock)
        let login = "evil_\(f.database.name.suffix(8))"
        try await f.db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('evil');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('evil', 'evil-prod');
            CREATE ROLE \(login) LOGIN IN ROLE herald_producer;
            INSERT INTO herald.producer_apps (producer, app_id) VALUES ('\(login)', 'evil');
            """)
        return (f, try await PostgresConnection.connect("\(f.database.conninfo) user=\(login)"))
    }

    /// A statement of the workers that waits on a lock fails after this, instead of the test
    /// hanging: on a build where a producer's lock stops a worker, the test fails here.
    static func boundWaits(_ f: WorkerFixture) async throws {
        try await f.db.execute("SET lock_timeout = '3s'")
    }

    @Test func aProducerHoldingTheOldAdvisoryKeysStopsNeitherIngestNorRetention() async throws {
        let (f, evil) = try await Self.shopAndAnEvilProducer()
        try await Self.boundWaits(f)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query(
            """
            SELECT herald.register_activity_token('shop', 'iphone', $1, 'DeliveryAttributes')
            """, [WorkerFixture.apnsToken("start")])
        // The keys the workers took before: any session can take an advisory lock.
        _ = try await evil.query("SELECT pg_advisory_lock(hashtext('herald.live_activities'), hashtext('shop'))")
        _ = try await evil.query("SELECT pg_advisory_lock(hashtext('herald.generations'))")
        // What they take now, a producer cannot.
        let error = await #expect(throws: PostgresError.self) {
            try await evil.execute("BEGIN; SELECT FROM herald.worker_locks FOR UPDATE")
        }
        #expect(error?.sqlState == "42501", "\(error?.message ?? "")")
        try await evil.execute("ROLLBACK")

        _ = try await f.db.query(
            """
            SELECT herald.start_activity('shop', 'order-1', 'DeliveryAttributes', '{}', '{"eta": 5}', 'On its way',
                                         user_ref => 'alice')
            """)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        let states = try await f.db.query("SELECT state FROM herald.notifications ORDER BY id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["accepted", "accepted"])

        let opened = try await f.db.query("SELECT herald.open_generation(interval '0 seconds')")[0]
        #expect(try opened.decode(0, as: Int?.self) != nil, "retention made and opened a generation")
    }

    /// A producer's open transaction holds every row it wrote: here, after
    /// herald.missed_notifications, its device's row and the delivery it fetched. The workers'
    /// functions wait for such a row half a second at most and go on with the rest of the batch:
    /// the other app's notification is ingested and sent and its report applied, while the app
    /// whose rows are locked waits (HeldApps), and its work goes through once the transaction
    /// ends.
    @Test func aProducersOpenTransactionHoldsUpOnlyItsOwnAppsWork() async throws {
        // A minute ahead of the database's clock, so that what the database made now is due.
        let clock = ManualClock(Date().addingTimeInterval(60))
        let (f, evil) = try await Self.shopAndAnEvilProducer(clock: clock)
        try await f.db.query(
            "UPDATE herald.app_fcm SET project_id = 'shop-prod', credentials_file = $1 WHERE app_id = 'evil'",
            [f.accountFile.path])
        try await f.register("phone", "android")
        _ = try await evil.query("SELECT herald.register_device('evil', 'e1', 'android', 'token-e1', 'mallory')")
        // e1 reports, so ingest counts its deliveries in its store at FCM, under its device's lock.
        try await f.db.execute("UPDATE herald.devices SET last_reported_at = now() WHERE device_id = 'e1'")
        _ = try await f.db.query("SELECT herald.send('evil', user_ref => 'mallory', title => 'earlier')")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'earlier')")
        try await f.ingest()
        try await f.dispatch()
        // Queued for e1 before the attack, sent during it, to a token FCM then calls dead.
        _ = try await f.db.query(
            "SELECT herald.send('evil', user_ref => 'mallory', title => 'to a dead token', collapse_key => 'c')")
        try await f.ingest()
        let references = try await f.db.query(
            """
            SELECT herald.delivery_reference(d.id, d.device_id) FROM herald.deliveries d WHERE d.state = 'sent'
            ORDER BY d.id
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(references.count == 2)

        // The attack, or an ordinary bug: evil's backend fetches what e1 missed and leaves its
        // transaction open.
        try await evil.execute("BEGIN")
        _ = try await evil.query("SELECT * FROM herald.missed_notifications('evil', 'e1')")
        let evilPID = try await evil.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)

        // herald status names the session while one of Herald's waits for it.
        let waiter = try await f.database.connect()
        try await waiter.execute("SET lock_timeout = '20s'")
        let waiting = Task {
            try? await waiter.query("SELECT FROM herald.devices WHERE device_id = 'e1' FOR NO KEY UPDATE")
        }
        var holder: StatusReport.LockHolder?
        #expect(
            try await eventually {
                holder = try await StatusReport.load(f.db).lockHolders.first { $0.pid == evilPID }
                return holder?.heraldSessionsWaiting == 1
            })
        #expect(holder?.actsFor == ["evil"] && holder?.state == "idle in transaction", "\(String(describing: holder))")
        let problem = try await StatusReport.load(f.db).problems(maximumReadyAge: 300).filter {
            $0.contains("session pid \(evilPID) ")
        }
        #expect(problem.count == 1 && problem[0].contains("session pid \(evilPID) (role evil_"), "\(problem)")
        #expect(problem.first?.contains("1 of Herald's sessions wait for it; it acts for evil") == true, "\(problem)")
        waiter.cancel()
        _ = await waiting.value

        for reference in references { _ = try await f.db.query("SELECT herald.report_delivery($1)", [reference]) }
        _ = try await f.db.query("SELECT herald.send('evil', user_ref => 'mallory', title => 'counted in e1''s store')")
        await f.emulator.setBehaviour(.unregistered, forToken: "token-e1")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'now')")
        try await f.ingest()
        let states = try await f.db.query("SELECT title, state FROM herald.notifications ORDER BY id").map {
            "\(try $0.decode(0, as: String.self)): \(try $0.decode(1, as: String.self))"
        }
        #expect(
            states == [
                "earlier: accepted", "earlier: accepted", "to a dead token: accepted",
                "counted in e1's store: received", "now: accepted",
            ])
        try await f.dispatch()
        #expect(await f.messages(to: "token-phone").count == 2)
        #expect(try await f.delivery(of: "e1").state == "token_invalid", "recorded, though e1's row is locked")
        try await f.reconcile()
        let delivered = try await f.db.query(
            """
            SELECT dev.device_id FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
            WHERE d.state = 'delivered'
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(delivered == ["phone"])

        // Once the transaction ends, what waited goes through.
        try await evil.execute("COMMIT")
        clock.advance(by: HeldApps.firstWait + .seconds(1))
        try await f.ingest()
        try await f.reconcile()
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.notifications WHERE state = 'received'")[0].decode(
                0, as: Int.self) == 0)
        let reported = try await f.db.query(
            "SELECT count(*) FROM herald.delivery_reports WHERE processed_at IS NOT NULL")[0].decode(0, as: Int.self)
        #expect(reported == 2)
        // The dead token's disable was left: the next send finds it dead again.
        #expect(
            try await f.db.query("SELECT disabled_at IS NULL FROM herald.devices WHERE device_id = 'e1'")[0].decode(
                0, as: Bool.self))
    }

    /// What a producer can LISTEN to carries nothing of another app: each app's device changes
    /// go to a channel of its own, whose name only its producers can learn. And a change the feed
    /// could not return yet when it was announced (an older transaction was open elsewhere on the
    /// server) is not missed: herald.device_changes_waiting says to read again.
    @Test func theDeviceFeedTellsAnAppOnlyOfItselfAndLosesNoChange() async throws {
        let (f, evil) = try await Self.shopAndAnEvilProducer()
        let shop = try await f.producer()
        let channel = try await shop.query("SELECT herald.device_changes_channel('shop')")[0].decode(
            0, as: String.self)
        let evilChannel = try await evil.query("SELECT herald.device_changes_channel('evil')")[0].decode(
            0, as: String.self)
        #expect(channel.hasPrefix("herald_device_changes_") && channel != evilChannel)
        let refused = await #expect(throws: PostgresError.self) {
            try await evil.query("SELECT herald.device_changes_channel('shop')")
        }
        #expect(refused?.sqlState == "42501")

        final class Heard: Sendable {
            private let messages = Mutex<[PostgresNotification]>([])
            func append(_ message: PostgresNotification) { messages.withLock { $0.append(message) } }
            var all: [PostgresNotification] { messages.withLock { $0 } }
        }
        func listen(_ channels: [String]) -> (PostgresListener, Heard) {
            let heard = Heard()
            let listener = PostgresListener(
                conninfo: f.database.conninfo, channels: channels, logger: Logger(label: "test"),
                onNotification: { heard.append($0) }, onReconnect: {})
            listener.start()
            return (listener, heard)
        }
        // evil listens where the changes of every app used to go, on Herald's wake-up channel and
        // on its own.
        let (evilListener, evilHeard) = listen(["herald_device_changes", "herald_jobs", evilChannel])
        let (shopListener, shopHeard) = listen([channel])
        defer {
            evilListener.stop()
            shopListener.stop()
        }
        try await f.register("pixel", "android")
        _ = try await evil.query("SELECT herald.register_device('evil', 'e1', 'android', 'token-e1', 'mallory')")
        // Both listeners are listening once a marker of each reaches it.
        #expect(
            await eventually {
                _ = try? await f.db.query(
                    "SELECT pg_notify($1, 'marker'), pg_notify($2, 'marker')", [channel, evilChannel])
                return !shopHeard.all.isEmpty && evilHeard.all.contains { $0.payload == "marker" }
            })

        // A writing transaction elsewhere on the server, older than the change.
        let writer = try await f.database.connect()
        try await writer.execute("BEGIN; SELECT pg_current_xact_id()")
        _ = try await shop.query("SELECT herald.unregister_device('shop', 'pixel')")
        #expect(await eventually { shopHeard.all.map(\.payload).filter { $0 != "marker" } == ["shop"] })
        #expect(try await shop.query("SELECT * FROM herald.changed_devices('shop')").isEmpty, "held back")
        #expect(try await shop.query("SELECT herald.device_changes_waiting('shop')")[0].decode(0, as: Int.self) == 1)
        // evil's own change after shop's: once evil hears it, it would have heard shop's before.
        _ = try await evil.query("SELECT herald.unregister_device('evil', 'e1')")
        #expect(await eventually { evilHeard.all.contains { $0.payload == "evil" } })
        #expect(
            evilHeard.all.filter { $0.payload != "marker" } == [
                PostgresNotification(channel: evilChannel, payload: "evil")
            ])

        try await writer.execute("COMMIT")
        // (Other tests' transactions on the same server hold the feed back too, for as long as
        // they last: waited for.)
        var feed: [(change: String, cursor: String)] = []
        #expect(
            try await eventually(timeout: .seconds(120)) {
                feed = try await shop.query("SELECT change, cursor FROM herald.changed_devices('shop')").map {
                    (change: try $0.decode(0, as: String.self), cursor: try $0.decode(1, as: String.self))
                }
                return !feed.isEmpty
            })
        #expect(feed.map(\.change) == ["logged_out"])
        #expect(
            try await shop.query("SELECT herald.device_changes_waiting('shop', $1)", [feed.last?.cursor])[0].decode(
                0, as: Int.self) == 0)
    }

    /// A row of megabytes cost every app's ingest seconds: what a producer writes is bounded at
    /// the door, with a message that says the limit, and data no provider could take is rejected
    /// by ingest as it is stored, its entries unread.
    @Test func sizesAreBoundedAtTheDoor() async throws {
        let (f, evil) = try await Self.shopAndAnEvilProducer()
        try await f.register("phone", "android")
        let megabytes = "{\"blob\": \"\(String(repeating: "x", count: 3 << 20))\"}"
        for sql in [
            "SELECT herald.send('evil', user_ref => 'mallory', title => 'hi', data => $1::jsonb)",
            "INSERT INTO herald.notifications (app_id, user_ref, title, data) VALUES ('evil', 'mallory', 'hi', $1::jsonb)",
        ] {
            let refused = await #expect(throws: PostgresError.self) { try await evil.query(sql, [megabytes]) }
            #expect(refused?.sqlState == "23514", "\(sql)")
            #expect(
                refused?.message.hasPrefix("a notification is at most 65536 bytes, its data, title, body, devices")
                    == true,
                "\(refused?.message.prefix(200) ?? "")")
        }
        let devices = "{" + (0..<5000).map { "\"device-\($0)\"" }.joined(separator: ",") + "}"
        await #expect(throws: PostgresError.self) {
            try await evil.query("SELECT herald.send('evil', device_ids => $1::text[], title => 'hi')", [devices])
        }
        // Under the door's bound but over any payload: rejected at ingest, saying so.
        // (Random, so that it stays larger than any payload as stored, compressed or not.)
        let large = "{\"blob\": \"\((0..<200).map { _ in UUID().uuidString }.joined())\"}"
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'hi', data => $1::jsonb)", [large])
        try await f.ingest()
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications")[0]
        #expect(try row.decode(0, as: String.self) == "rejected")
        #expect(
            try row.decode(1, as: String.self).hasPrefix("data is ")
                && row.decode(1, as: String.self).hasSuffix(
                    "more than any provider's payload takes (5120 bytes); shorten it")
        )
    }

    @Test func aDeliveryMadeForOneUserIsNotSentToTheNextUserOfTheDevice() async throws {
        let f = try await WorkerFixture.make()
        // A shared tablet: alice's code is scheduled, she logs out, bob logs in on the same
        // device with the same token.
        try await f.register("shared-tablet", "android", user: "alice")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Your code is 1234', send_at => now() + '1 hour')"
        )
        try await f.ingest()
        _ = try await f.db.query("SELECT herald.unregister_device('shop', 'shared-tablet')")
        try await f.register("shared-tablet", "android", user: "bob")
        // A device registered for another user without a logout between: the same.
        try await f.register("phone", "android", user: "alice")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Your code is 5678', send_at => now() + '1 hour')"
        )
        try await f.ingest()
        try await f.register("phone", "android", user: "carol")
        // A token refresh of the same user keeps the registration: that delivery still goes.
        try await f.register("own-phone", "android", user: "dave")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'dave', title => 'Still yours', send_at => now() + '1 hour')")
        try await f.ingest()
        _ = try await f.db.query(
            "SELECT herald.register_device('shop', 'own-phone', 'android', 'token-own-phone-refreshed', 'dave')")

        try await f.db.query("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.dispatch()
        for device in ["shared-tablet", "phone"] {
            let delivery = try await f.delivery(of: device)
            #expect(delivery.state == "cancelled", "\(device)")
            #expect(delivery.error?.contains("registered again") == true, "\(device): \(delivery.error ?? "")")
            #expect(await f.messages(to: "token-\(device)").isEmpty, "\(device)")
        }
        #expect(try await f.delivery(of: "own-phone").state == "sent")
        #expect(await f.messages(to: "token-own-phone-refreshed").count == 1)
    }

    @Test func twoDevicesRegisteringOneTokenAtOnceLeaveItLiveOnOne() async throws {
        let (f, _) = try await Self.shopAndAnEvilProducer()
        try await f.registerIPhone("alice-iphone", user: "alice")
        try await f.registerIPhone("bob-iphone", user: "bob")
        let token = String(repeating: "ab", count: 32)
        let second = try await f.database.connect()
        let secondPID = try await second.query("SELECT pg_backend_pid()")[0].decode(0, as: Int32.self)
        let observer = try await f.database.connect()
        for (register, table, live) in [
            (
                "SELECT herald.register_push_type_token('shop', $1, 'voip', $2)", "push_type_tokens",
                "disabled_at IS NULL"
            ),
            (
                "SELECT herald.register_activity_token('shop', $1, $2, 'DeliveryAttributes')", "activity_tokens",
                "ended_at IS NULL"
            ),
        ] {
            // Alice's registration is in an open transaction when bob's starts; bob's must wait
            // for it, whatever the order, and then take the token from her.
            try await f.db.execute("BEGIN")
            _ = try await f.db.query(register, ["alice-iphone", token])
            let bobs = Task { try await second.query(register, ["bob-iphone", token]) }
            let waiting = try await eventually {
                try await observer.query(
                    "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", [secondPID]
                ).first?.decode(0, as: Bool?.self) == true
            }
            #expect(waiting, "\(table): bob's registration waits for alice's")
            try await f.db.execute("COMMIT")
            _ = try await bobs.value
            let holders = try await f.db.query(
                """
                SELECT dev.device_id FROM herald.\(table) t JOIN herald.devices dev ON dev.id = t.device_id
                WHERE t.token = $1 AND t.\(live)
                """, [token]
            ).map { try $0.decode(0, as: String.self) }
            #expect(holders == ["bob-iphone"], "\(table)")
        }
    }
}
