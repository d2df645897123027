import Foundation
import HeraldCore
import HeraldCrypto
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// The dispatch worker against a real database and the FCM emulator.
@Suite struct DispatchWorkerTests {
    @Test func eachPlatformGetsItsPayloadShape() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.register("iphone", "ios")
        let alert = try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42', data => '{"order": "42"}',
                               image_url => 'https://img/x.png', deep_link => 'shop://o/42', android_channel_id => 'orders',
                               sound => 'ding', badge => 3, ios_category => 'ORDER', ios_thread_id => 'orders',
                               priority => 'normal', ttl => '2 hours', collapse_key => 'order-42')
            """)[0].decode(0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()

        let pixel = try await f.delivery(of: "pixel")
        let android = try #require(await f.message(to: "token-pixel"), "\(pixel)")
        #expect(android["notification"] == nil, "Android gets a data-only message")
        let data = try #require(android["data"] as? [String: String])
        #expect(data["title"] == "Shipped")
        #expect(data["body"] == "Parcel 42")
        #expect(data["order"] == "42")
        #expect(data["image_url"] == "https://img/x.png")
        #expect(data["deep_link"] == "shop://o/42")
        #expect(data["channel_id"] == "orders")
        #expect(data["herald_notification_id"] == String(alert))
        #expect(data["herald_report"]?.isEmpty == false)
        let androidConfig = try #require(android["android"] as? [String: Any])
        #expect(androidConfig["priority"] as? String == "NORMAL")
        #expect(androidConfig["collapse_key"] as? String == "order-42")
        let ttl = try #require((androidConfig["ttl"] as? String)?.dropLast()).flatMap { Int($0) }
        #expect(ttl != nil && ttl! > 7100 && ttl! <= 7200)

        let ios = try #require(await f.message(to: "token-iphone"))
        let apns = try #require(ios["apns"] as? [String: Any])
        let headers = try #require(apns["headers"] as? [String: String])
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-collapse-id"] == "order-42")
        #expect(Int(headers["apns-expiration"] ?? "") ?? 0 > Int(Date().timeIntervalSince1970))
        let payload = try #require(apns["payload"] as? [String: Any])
        let aps = try #require(payload["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: String]) == ["title": "Shipped", "body": "Parcel 42"])
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "ding")
        #expect(aps["category"] as? String == "ORDER")
        #expect(aps["thread-id"] as? String == "orders")
        #expect(payload["herald_notification_id"] as? String == String(alert))
        #expect(payload["image_url"] as? String == "https://img/x.png")
        #expect(payload["order"] as? String == "42")

        // The report reference names this delivery and device, and only they can be read from it.
        let reference = try #require(payload["herald_report"] as? String)
        let secret = try await f.db.query("SELECT value FROM herald.secrets WHERE name = 'report_hmac'")[0].decode(
            0, as: Data.self)
        let opened = try #require(DeliveryReference(secret: [UInt8](secret)).open(reference))
        let ids = try await f.db.query(
            "SELECT d.id, d.device_id FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = 'iphone'"
        )[0]
        #expect(opened.deliveryID == (try ids.decode(0, as: Int64.self)))
        #expect(opened.deviceID == (try ids.decode(1, as: Int64.self)))
        #expect(DeliveryReference(secret: Array("another secret, not ours".utf8)).open(reference) == nil)

        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(try await f.delivery(of: "iphone").name?.hasPrefix("projects/shop-prod/messages/") == true)
    }

    @Test func silentAndTopicSendsHaveTheirShapes() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("iphone", "ios")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', silent => true, data => '{\"sync\": \"1\"}')")
        _ = try await f.db.query("SELECT herald.send('shop', topic => 'deals', title => 'Sale', body => 'Today')")
        try await f.ingest()
        try await f.dispatch()
        let silent = try #require(await f.message(to: "token-iphone"))
        let apns = try #require(silent["apns"] as? [String: Any])
        #expect((apns["headers"] as? [String: String])?["apns-push-type"] == "background")
        #expect((apns["headers"] as? [String: String])?["apns-priority"] == "5")
        let payload = try #require(apns["payload"] as? [String: Any])
        #expect((payload["aps"] as? [String: Int]) == ["content-available": 1])
        #expect(payload["sync"] as? String == "1")
        let topic = try #require(await f.message(to: "deals"))
        #expect((topic["notification"] as? [String: String]) == ["title": "Sale", "body": "Today"])
        #expect(topic["topic"] as? String == "deals")
    }

    /// `sent_at` is when FCM answered, not when the batch was claimed: a send that takes
    /// 700 ms is recorded at least 700 ms after dispatch began.
    @Test func sentAtIsWhenFCMAnswered() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("slowpoke", "android")
        await f.emulator.setBehaviour(.slow(milliseconds: 700), forToken: "token-slowpoke")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        let dispatchStarted = Date()
        try await f.dispatch()
        let row = try await f.db.query(
            "SELECT state, extract(epoch FROM sent_at)::float8, sent_at = finished_at FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "sent")
        let sentAt = try row.decode(1, as: Double.self)
        #expect(sentAt >= dispatchStarted.timeIntervalSince1970 + 0.7, "sent_at is before FCM could have answered")
        #expect(sentAt <= Date().timeIntervalSince1970)
        #expect(try row.decode(2, as: Bool.self))
    }

    @Test func eachOutcomeLandsInTheDeliveryRow() async throws {
        let f = try await WorkerFixture.make()
        let devices: [(String, EmulatorBehaviour)] = [
            ("dead", .unregistered), ("broken", .invalidMessage), ("busy", .internalError),
            ("apns", .thirdPartyAuthError),
        ]
        for (device, behaviour) in devices {
            try await f.register(device, device == "apns" ? "ios" : "android")
            await f.emulator.setBehaviour(behaviour, forToken: "token-\(device)")
        }
        try await f.register("fine", "android")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()

        #expect(try await f.delivery(of: "fine").state == "sent")
        let dead = try await f.delivery(of: "dead")
        #expect(dead.state == "token_invalid")
        #expect(dead.error?.contains("UNREGISTERED") == true)
        let disabled = try await f.db.query("SELECT disabled_cause FROM herald.devices WHERE device_id = 'dead'")[0]
        #expect(try disabled.decode(0, as: String?.self) == "token_invalid")
        let broken = try await f.delivery(of: "broken")
        #expect(broken.state == "failed")
        #expect(broken.error?.contains("INVALID_ARGUMENT") == true)
        let busy = try await f.delivery(of: "busy")
        #expect(busy.state == "queued")
        #expect(busy.error?.contains("INTERNAL") == true)
        // A broken APNs key is the sender's problem: the device stays enabled, the app shows it.
        let apns = try await f.delivery(of: "apns")
        #expect(apns.state == "queued")
        #expect(
            try await f.db.query("SELECT disabled_at IS NULL FROM herald.devices WHERE device_id = 'apns'")[0].decode(
                0, as: Bool.self))
        let appError = try await f.db.query("SELECT config_error FROM herald.app_problems WHERE app_id = 'shop'")[0]
        #expect(try appError.decode(0, as: String?.self)?.contains("THIRD_PARTY_AUTH_ERROR") == true)
        // Only the dead token's device was disabled.
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL")[0].decode(
                0, as: Int.self) == 1)
    }

    @Test func expiredOrDisabledBeforeSendingIsNeverSent() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("late", "android", user: "late-user")
        try await f.register("gone", "android", user: "gone-user")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'late-user', title => 'Hi')")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'gone-user', title => 'Hi')")
        try await f.ingest()
        try await f.db.execute(
            "UPDATE herald.notifications SET expires_at = now() - interval '1 second' WHERE user_ref = 'late-user'")
        _ = try await f.db.query("SELECT herald.unregister_device('shop', 'gone')")
        try await f.dispatch()
        #expect(try await f.delivery(of: "late").state == "expired")
        let gone = try await f.delivery(of: "gone")
        #expect(gone.state == "cancelled")
        #expect(gone.error?.contains("logged out") == true)
        #expect(await f.emulator.received.isEmpty)
    }

    @Test func retryAfterDelaysThatDeliveryOnly() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("slow", "android", user: "a")
        try await f.register("quick", "android", user: "b")
        await f.emulator.setBehaviour(.unavailable(retryAfter: 120), forToken: "token-slow")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'a', title => 'Hi')")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'b', title => 'Hi')")
        try await f.ingest()
        let before = Date()
        try await f.dispatch()
        #expect(try await f.delivery(of: "quick").state == "sent")
        #expect(try await f.delivery(of: "slow").state == "queued")
        let runAt = try await f.db.query("SELECT min(run_at) FROM herald.deliveries WHERE state = 'queued'")[0].decode(
            0, as: Date.self)
        #expect(runAt >= before.addingTimeInterval(119))
    }

    @Test func everyAttemptsReasonStaysReadable() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("flaky", "android")
        await f.emulator.setBehaviour(.internalError, forToken: "token-flaky", times: 2)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        for _ in 0..<3 {
            try await f.dispatch()
            try await f.db.execute(
                "UPDATE herald.deliveries SET run_at = now() - interval '1 second' WHERE state = 'queued'")
        }
        let row = try await f.db.query(
            "SELECT delivery_state, attempts, error_history FROM herald.notification_journey WHERE device_id = 'flaky'")[
                0]
        #expect(try row.decode(0, as: String.self) == "sent")
        #expect(try row.decode(1, as: Int.self) == 3)
        let history = try row.decode(2, as: [String].self)
        #expect(history.count == 2)
        #expect(history.allSatisfy { $0.contains("500 INTERNAL") })
    }

    @Test func aBrokenAppCostsOneProbeAMinuteNotASendPerMessage() async throws {
        let f = try await WorkerFixture.make()
        for n in 1...20 {
            try await f.register("phone-\(n)", "ios", user: "u\(n)")
            await f.emulator.setBehaviour(.thirdPartyAuthError, forToken: "token-phone-\(n)")
            _ = try await f.db.query("SELECT herald.send('shop', user_ref => $1, title => 'Hi')", ["u\(n)"])
        }
        try await f.ingest()
        try await f.dispatch()  // the first batch finds out
        let afterFirst = await f.emulator.sendRequests
        #expect(afterFirst == 20)
        #expect(try await f.db.query("SELECT count(*) FROM herald.app_problems")[0].decode(0, as: Int.self) == 1)

        // Within the minute: nothing goes out, and no attempt is spent.
        try await f.db.execute(
            "UPDATE herald.deliveries SET run_at = now() - interval '1 second' WHERE state = 'queued'")
        let attemptsBefore = try await f.db.query("SELECT sum(attempts) FROM herald.deliveries")[0].decode(
            0, as: Int.self)
        try await f.dispatch()
        #expect(await f.emulator.sendRequests == afterFirst)
        #expect(
            try await f.db.query("SELECT sum(attempts) FROM herald.deliveries")[0].decode(0, as: Int.self)
                == attemptsBefore)
        #expect(
            try await f.db.query(
                "SELECT min(run_at) > now() + interval '10 seconds' FROM herald.deliveries WHERE state = 'queued'")[0]
                .decode(
                    0, as: Bool.self))

        // A minute later: one probe. It fails, so the others keep waiting.
        try await f.probeAgain()
        #expect(await f.emulator.sendRequests == afterFirst + 1)

        // Fixed: the next probe succeeds, the problem clears, and the rest go out.
        for n in 1...20 { await f.emulator.setBehaviour(nil, forToken: "token-phone-\(n)") }
        try await f.probeAgain()
        #expect(try await f.db.query("SELECT count(*) FROM herald.app_problems")[0].decode(0, as: Int.self) == 0)
        try await f.db.execute(
            "UPDATE herald.deliveries SET run_at = now() - interval '1 second' WHERE state = 'queued'")
        try await f.dispatch()
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")[0].decode(
                0, as: Int.self) == 20)
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL")[0].decode(
                0, as: Int.self) == 0)
    }

    @Test func retryAfterSpacesTheAttemptsAndQuotaWaitsAMinute() async throws {
        let clock = ManualClock(Date())
        let f = try await WorkerFixture.make(clock: clock)
        try await f.register("flaky", "android", user: "a")
        try await f.register("throttled", "android", user: "b")
        await f.emulator.setBehaviour(.unavailable(retryAfter: 1), forToken: "token-flaky", times: 2)
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: nil), forToken: "token-throttled")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'a', title => 'Hi')")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'b', title => 'Hi')")
        try await f.ingest()

        func nextRun(_ device: String) async throws -> Date {
            try await f.db.query(
                """
                SELECT d.run_at FROM herald.deliveries d
                JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = $1
                """, [device])[0].decode(0, as: Date.self)
        }
        var attempts: [Date] = []
        for _ in 0..<3 {
            attempts.append(clock.now())
            try await f.dispatch()
            if try await f.delivery(of: "flaky").state == "sent" { break }
            let due = try await nextRun("flaky")
            // PostgreSQL keeps microseconds; allow for the rounding.
            #expect(due.timeIntervalSince(clock.now()) >= 0.999, "Retry-After: 1 is honoured")
            clock.advance(by: .seconds(due.timeIntervalSince(clock.now())))
        }
        #expect(attempts.count == 3)
        #expect(zip(attempts, attempts.dropFirst()).allSatisfy { $1.timeIntervalSince($0) >= 0.999 })
        #expect(try await f.delivery(of: "flaky").state == "sent")
        // QUOTA_EXCEEDED without Retry-After still waits a minute, at least.
        let throttledDue = try await nextRun("throttled")
        #expect(throttledDue.timeIntervalSince(attempts[0]) >= 59.999)
        #expect(try await f.delivery(of: "throttled").state == "queued")
        // Neither 503s nor a quota error blame the device.
        let disabled = try await f.db.query("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(try disabled[0].decode(0, as: Int.self) == 0)
    }

    @Test func dryRunIsValidatedNotSent() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Test', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "validated")
        #expect(await f.emulator.received.first?.validateOnly == true)
    }

    @Test func missingCredentialsAreAConfigurationErrorThatBlamesNoDevice() async throws {
        let f = try await WorkerFixture.make()
        try await f.db.execute("UPDATE herald.app_fcm SET credentials_file = '/nonexistent/sa.json'")
        try await f.register("pixel", "android")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "pixel")
        #expect(delivery.state == "queued")
        #expect(delivery.error?.contains("cannot read the service-account file") == true)
        #expect(
            try await f.db.query("SELECT count(*) = 1 FROM herald.app_problems WHERE scope = 'fcm'")[0].decode(
                0, as: Bool.self))
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL")[0].decode(
                0, as: Int.self) == 0)
    }

    /// A credentials file that cannot be opened because Herald ran out of file descriptors
    /// (EMFILE) is Herald's trouble, not the app's (issue #40): no configuration problem is
    /// recorded for the app, and its deliveries wait without an attempt.
    @Test func runningOutOfDescriptorsIsNeverTheAppsBrokenCredentials() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        // The file is there; the process cannot open it (here: it does not exist, and the
        // descriptors are said to be spent).
        try await f.db.execute("UPDATE herald.app_fcm SET credentials_file = '/nonexistent/sa.json'")
        var providers = Senders.Configuration()
        providers.endpoints["fcm"] = f.emulator.baseURL
        providers.descriptorsExhausted = { true }
        let context = WorkerContext(
            connection: f.db, clock: SystemClock(), logger: Logger(label: "test"),
            senders: Senders(http: HTTPClient(), configuration: providers, logger: Logger(label: "test")))
        let worker = DispatchWorker(context: context)
        _ = try await worker.runBatch(limit: 10, isStopping: { false })
        await worker.finish()  // the batch's sends are recorded as they end, after runBatch returns
        let row = try await f.db.query("SELECT state, attempts, last_error FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "queued")
        #expect(try row.decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty, "the app is not blamed")
        #expect(try await f.db.query("SELECT 1 FROM herald.app_config_problems").isEmpty)
    }
}
