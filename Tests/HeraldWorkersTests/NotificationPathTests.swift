import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

/// `herald.notification_path`: what became of a notification, step by step, as an operator or
/// the producer asks "why did this user not see it?".
@Suite struct NotificationPathTests {
    /// Its steps, as `device: step (detail)` lines, in order.
    static func path(_ db: PostgresConnection, _ arguments: String, _ values: [any PostgresEncodable] = [])
        async throws -> [String]
    {
        try await db.query(
            "SELECT coalesce(device_id || ': ', '') || step || coalesce(' (' || detail || ')', '') FROM herald.notification_path('shop', \(arguments))",
            values
        ).map { try $0.decode(0) }
    }

    /// Sent, and Push Kit's receipt says delivered; the next one to a user whose phone Push Kit
    /// said has not the app any more is not sent to it, and the path says since when and why.
    @Test func aDeliveredOneAndOneNotSentToADisabledPhone() async throws {
        let r = try await PushKitReceiptTests().start()
        defer { r.server.cancel() }
        #expect(try await r.post(states: [PushKitReceiptTests().token("nova"): 2]).status == 200)
        let first = try await r.f.db.query("SELECT min(id) FROM herald.notifications")[0].decode(0, as: Int64.self)
        let delivered = try await Self.path(r.f.db, "notification => $1", [first])
        #expect(delivered.count == 5, "\(delivered)")
        #expect(delivered.first == "committed (to user user0)")
        #expect(delivered.dropFirst().first == "accepted (1 deliveries)")
        #expect(delivered.dropFirst(2).first == "mate: fanned out (android_data)")
        #expect(delivered.dropFirst(3).first?.hasPrefix("mate: sent (the provider's id: ") == true)
        #expect(delivered.last == "mate: receipt: delivered (Huawei Push Kit receipt 0: delivered to the device)")

        try await r.f.db.query(
            "SELECT herald.send('shop', user_ref => 'user1', title => 'Again', idempotency_key => 'again-1')")
        try await r.f.ingest()
        let notSent = try await Self.path(r.f.db, "idempotency_key => 'again-1'")
        #expect(notSent.count == 3, "\(notSent)")
        #expect(notSent.dropFirst().first?.hasPrefix("no_devices") == true)
        #expect(
            notSent.last?.hasPrefix("nova: not sent to (disabled since ") == true
                && notSent.last?.contains("token_invalid (Huawei Push Kit receipt 2: the app is not installed") == true,
            "\(notSent)")
        // A user's recent ones, newest first.
        let user1 = try await Self.path(r.f.db, "user_ref => 'user1'")
        #expect(user1.first == "committed (to user user1)" && user1.count == notSent.count + 5, "\(user1)")
        _ = r.secret
    }

    /// Held while the phone's store at FCM was full, and fetched by the app after the catch-up
    /// message woke it: the path says each, in order.
    @Test func oneHeldForTheStoreAndFetched() async throws {
        let catchUp = CatchUpTests()
        let f = try await catchUp.reportingPhone()
        let producer = try await f.producer()
        await f.emulator.setFCMDevice(CatchUpTests.token, online: false)
        try await catchUp.send(f, titles: (1...85).map { "Order \($0)" })
        let held = try await f.db.query(
            "SELECT notification_id FROM herald.deliveries WHERE held_since IS NOT NULL ORDER BY id DESC LIMIT 1")[0]
            .decode(0, as: Int64.self)
        var after: Int64? = nil
        while let last = try await producer.query(
            "SELECT cursor FROM herald.missed_notifications('shop', 'pixel', $1, 50)", [after]
        ).last {
            after = try last.decode(0, as: Int64.self)
        }
        try await f.reconcile()
        try await f.dispatch()
        let path = try await Self.path(f.db, "notification => $1", [held]).filter { !$0.hasPrefix("pixel: answered") }
        let steps = path.map { $0.split(separator: " (").first.map(String.init) ?? $0 }
        #expect(
            steps == [
                "committed", "accepted", "pixel: fanned out", "pixel: held for the device's store",
                "pixel: the device was woken", "pixel: the app fetched it", "pixel: the app reported it delivered",
                "pixel: ended delivered",
            ], "\(path)")
        #expect(path.contains("pixel: the device was woken (a silent wake-up to fetch 5 missed)"), "\(path)")
    }

    /// Sent to an iPhone that was offline, unreported while a later one was: the wake-up that
    /// made the app fetch it is on its path.
    @Test func oneSentUnreportedAndWoken() async throws {
        let reconcile = ReconcileTests()
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("iphone", "ios")
        let references = try await reconcile.sendAlerts(f, to: "iphone", count: 2, title: "Order")
        clock.advance(by: .seconds(300))
        #expect(try await reconcile.report(f, references[1], device: "iphone").outcome == "accepted")
        try await f.reconcile()
        try await f.dispatch()
        #expect(await reconcile.wakeups(f, to: "iphone").count == 1)
        let first = try await f.db.query(
            "SELECT min(notification_id) FROM herald.deliveries WHERE payload_kind = 'ios_alert'")[0].decode(
                0, as: Int64.self)
        let path = try await Self.path(f.db, "notification => $1", [first])
        let steps = path.map { $0.split(separator: " (").first.map(String.init) ?? $0 }
        #expect(
            steps == [
                "committed", "accepted", "iphone: fanned out", "iphone: sent", "iphone: the device was woken",
            ], "\(path)")
    }

    /// One that expired before it could go: its attempt's answer, and where it ended.
    @Test func oneThatExpiredWaitingForItsProvider() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        await f.emulator.setBehaviour(.internalError, forToken: "token-pixel")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Flash sale', ttl => '1 hour', idempotency_key => 'sale')"
        )
        try await f.ingest()
        try await f.dispatch()
        try await f.db.query(
            "UPDATE herald.deliveries SET state = 'expired', finished_at = now(), last_error = 'expired: its notification''s expires_at passed', run_at = NULL"
        )
        let path = try await Self.path(f.db, "idempotency_key => 'sale'")
        #expect(path.count == 5, "\(path)")
        #expect(path.dropFirst(3).first?.hasPrefix("pixel: answered (") == true, "\(path)")
        #expect(path.last == "pixel: ended expired (expired: its notification's expires_at passed)", "\(path)")
    }

    /// Only for an app the session acts for (a producer's own), and for exactly one of what names
    /// notifications.
    @Test func itAsksWhichNotificationsAndWhose() async throws {
        let f = try await WorkerFixture.make()
        await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT * FROM herald.notification_path('shop')")
        }
        try await f.db.query("INSERT INTO herald.apps (app_id) VALUES ('other')")
        let producer = try await f.producer()
        #expect(try await producer.query("SELECT * FROM herald.notification_path('shop', notification => 1)").isEmpty)
        let refused = await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT * FROM herald.notification_path('other', notification => 1)")
        }
        #expect(refused?.sqlState == "42501", "\(String(describing: refused))")
    }
}
