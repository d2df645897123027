import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Testing

/// Browsers as a third platform: the dispatch worker against a real database and the
/// emulator's push service behind nginx (TLS, HTTP/2), which checks VAPID and decrypts.
@Suite struct WebPushDispatchTests {
    @Test func aBrowserGetsTheNotificationEncryptedSignedAndShowable() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        let endpoint = try await f.registerBrowser("firefox")
        let id = try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42', data => '{"order": 42}',
                               image_url => 'https://img/x.png', deep_link => 'https://shop.example/o/42',
                               priority => 'normal', ttl => '2 hours', collapse_key => 'order-42')
            """)[0].decode(0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()

        let delivery = try await f.delivery(of: "firefox")
        #expect(delivery.state == "sent", "\(delivery)")
        let pushes = await f.emulator.webPushes
        try #require(pushes.count == 1)
        let push = pushes[0]
        #expect(push.endpoint == endpoint)
        #expect(delivery.name == push.location, "the push service's Location is the provider id")
        #expect(push.urgency == "normal")
        #expect(push.topic == "order-42")
        #expect(push.ttl > 7100 && push.ttl <= 7200)
        let document = push.document
        #expect(document["title"] as? String == "Shipped")
        #expect(document["body"] as? String == "Parcel 42")
        #expect(document["image_url"] as? String == "https://img/x.png")
        #expect(document["deep_link"] as? String == "https://shop.example/o/42")
        #expect(document["data"] as? [String: String] == ["order": "42"])
        #expect(document["tag"] as? String == "order-42")
        #expect(document["herald_notification_id"] as? String == String(id))
        #expect((document["herald_report"] as? String)?.isEmpty == false)
        // The endpoint is as secret as a token: the views show a hint.
        let hint = try await f.db.query("SELECT token_hint FROM herald.notification_journey")[0].decode(
            0, as: String.self)
        #expect(hint.hasPrefix("https://127.0.0.1:") && !hint.contains(endpoint.suffix(20)))
    }

    @Test func oneNotificationReachesAPhoneAnIPhoneAndABrowser() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.register("pixel", "android")
        try await f.register("iphone", "ios")
        try await f.registerBrowser("chrome")
        let id = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Hello', body => 'everywhere')")[0]
            .decode(0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()
        for device in ["pixel", "iphone", "chrome"] {
            #expect(try await f.delivery(of: device).state == "sent", "\(device)")
        }
        let android = try #require(await f.message(to: "token-pixel")?["data"] as? [String: String])
        let ios = try #require(await f.message(to: "token-iphone")?["apns"] as? [String: Any])
        let iosPayload = try #require(ios["payload"] as? [String: Any])
        let browser = try #require(await f.emulator.webPushes.first?.document)
        #expect(android["herald_notification_id"] == String(id))
        #expect(iosPayload["herald_notification_id"] as? String == String(id))
        #expect(browser["herald_notification_id"] as? String == String(id))
        #expect(browser["tag"] as? String == String(id), "without a collapse key, a repeat replaces by notification id")
        #expect([android["title"], browser["title"] as? String] == ["Hello", "Hello"])
    }

    @Test(arguments: [
        (EmulatorBehaviour.gone, "token_invalid"), (.unregistered, "token_invalid"), (.payloadTooLarge, "failed"),
        (.quotaExceeded(retryAfter: 30), "queued"), (.unavailable(retryAfter: nil), "queued"),
        (.thirdPartyAuthError, "queued"),
    ])
    func pushServiceAnswers(behaviour: EmulatorBehaviour, state: String) async throws {
        let f = try await WorkerFixture.make(webPush: true)
        let endpoint = try await f.registerBrowser("edge")
        await f.emulator.setBehaviour(behaviour, forToken: endpoint)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        let sentAfter = Date()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "edge")
        #expect(delivery.state == state, "\(delivery)")
        let device = try await f.db.query("SELECT disabled_cause, disabled_reason FROM herald.devices")[0]
        let problems = try await f.db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        switch behaviour {
        case .gone, .unregistered:
            #expect(try device.decode(0, as: String?.self) == "token_invalid")
            #expect(try device.decode(1, as: String?.self)?.hasPrefix("Web Push: push service answered 4") == true)
        case .quotaExceeded:
            let due = try await f.db.query("SELECT run_at FROM herald.deliveries")[0].decode(0, as: Date.self)
            #expect(due.timeIntervalSince(sentAfter) >= 29.999, "Retry-After is honoured")
        case .thirdPartyAuthError:
            // One subscription's word: it may have been made with another applicationServerKey.
            #expect(problems.isEmpty, "one refused subscription is not yet the app's web configuration")
            #expect(delivery.error?.contains("not yet blamed") == true, "\(delivery)")
        default:
            #expect(try device.decode(0, as: String?.self) == nil, "the browser is not blamed")
        }
        #expect(problems.isEmpty)
    }

    /// Two browsers refused and none accepted: the app's VAPID key, not the subscriptions.
    @Test func aRefusedVAPIDKeyHoldsBackBrowsersOnly() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.register("pixel", "android")
        for browser in ["safari", "firefox"] {
            let endpoint = try await f.registerBrowser(browser)
            await f.emulator.setBehaviour(.thirdPartyAuthError, forToken: endpoint)
        }
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'One')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(try await f.delivery(of: "safari").state == "queued")
        #expect(try await f.delivery(of: "firefox").state == "queued")

        // The next notification: Android goes at once; the browser waits for the probe, unsent.
        let requestsBefore = await f.emulator.webPushRequests
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Two')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.messages(to: "token-pixel").count == 2)
        #expect(await f.emulator.webPushRequests == requestsBefore)
        let waiting = try await f.delivery(of: "safari")
        #expect(waiting.state == "queued")
        #expect(waiting.error?.contains("browsers (Web Push) is failing") == true, "\(waiting)")
        let problem = try await f.db.query("SELECT scope, waiting FROM herald.app_problems")
        #expect(try problem.map { try $0.decode(0, as: String.self) } == ["web"])
        #expect(try problem[0].decode(1, as: String.self) == "deliveries to browsers")
    }

    @Test func aBrokenIOSSideNeverSlowsAndroid() async throws {
        // One iPhone's 401 THIRD_PARTY_AUTH_ERROR (the APNs key in Firebase) used to hold back
        // every delivery of the app for a minute, including an Android retry asked for in 1 s.
        let f = try await WorkerFixture.make()
        try await f.register("iphone", "ios")
        try await f.register("pixel", "android")
        await f.emulator.setBehaviour(.thirdPartyAuthError, forToken: "token-iphone")
        await f.emulator.setBehaviour(.unavailable(retryAfter: 1), forToken: "token-pixel", times: 1)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let scopes = try await f.db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(scopes == ["fcm_apns"])
        let retryIn = try await f.db.query(
            """
            SELECT extract(epoch FROM d.run_at - now())::float8 FROM herald.deliveries d
            JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = 'pixel'
            """)[0].decode(0, as: Double.self)
        #expect(retryIn < 5, "Android keeps its own Retry-After: 1")
        try await f.db.execute("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(try await f.delivery(of: "iphone").state == "queued")
        #expect(try await f.delivery(of: "iphone").error?.contains("iOS through FCM is failing") == true)
    }

    @Test func anAppWithoutAVAPIDKeyWaitsForOneWithoutBlamingTheBrowser() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.registerBrowser("firefox")
        try await f.db.execute("UPDATE herald.app_webpush SET vapid_key_file = NULL")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "firefox")
        #expect(delivery.state == "queued")
        #expect(delivery.error?.contains("vapid_key_file") == true, "\(delivery)")
        #expect(try await f.db.query("SELECT scope FROM herald.app_problems")[0].decode(0, as: String.self) == "web")
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.devices WHERE disabled_at IS NOT NULL")[0].decode(
                0, as: Int.self) == 0)
    }

    @Test func aPayloadTooLargeForBrowsersFailsOnlyTheirDeliveries() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.register("pixel", "android")
        try await f.registerBrowser("chrome")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Long', body => repeat('x', 3860))")
        try await f.ingest()
        let browser = try await f.delivery(of: "chrome")
        #expect(browser.state == "failed")
        #expect(browser.error?.contains("over Web Push's 3993 bytes of plaintext") == true, "\(browser)")
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(await f.emulator.webPushRequests == 0)
    }

    @Test func aDryRunIsEncryptedButNotSent() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.registerBrowser("chrome")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Test', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "chrome").state == "validated")
        #expect(await f.emulator.webPushRequests == 0)
    }
}
