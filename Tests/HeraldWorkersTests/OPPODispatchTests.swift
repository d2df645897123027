import Foundation
import HeraldCore
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// OPPO, OnePlus and realme phones through OPPO Push's stand-in, which checks each request as
/// OPPO documents it (``OPPOService``): the signed auth request, the auth token, the unicast
/// message's fields and lengths, the app's registered channels, OPPO's categories and notify
/// levels, and its return codes.
@Suite struct OPPODispatchTests {
    static let appKey = "3b0f6a8c4d2e4f1a9b7c5d3e1f0a2b4c"

    /// The fixture's app `shop` with an OPPO Push setup the stand-in trusts (or, with `secret`,
    /// another): its private channel `orders` for service notifications (category ORDER), its
    /// public channel `news` for marketing ones, and, when given, a public daily limit. The
    /// secret's file is kept for the test's lifetime.
    func oppoApp(_ f: WorkerFixture, secret: String = "the-master-secret", publicDailyLimit: Int? = nil)
        async throws -> SecretFile
    {
        await f.emulator.registerOPPOApp(
            appKey: Self.appKey, masterSecret: "the-master-secret", channels: ["orders": true, "news": false],
            publicDailyLimit: publicDailyLimit)
        let file = try SecretFile(contents: secret + "\n", suffix: ".secret")
        try await f.db.query(
            """
            INSERT INTO herald.app_oppo (app_id, app_key, master_secret_file, service_channel_id, marketing_channel_id,
                                         service_category)
            VALUES ('shop', $1, $2, 'orders', 'news', 'ORDER')
            """, [Self.appKey, file.path])
        return file
    }

    /// A registration id of OPPO's shape (`CN_` and 32 hex digits), one for each device name.
    func registerOPPO(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let hex = device.utf8.map { String(format: "%02x", $0) }.joined()
        let regID = "CN_" + hex + String(repeating: "0", count: max(0, 32 - hex.count))
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'oppo_token')", [device, regID, user])
        return regID
    }

    // The request, field by field, as OPPO's pages describe it ("单点推送" id=11235: target_type 2
    // and target_value; "通知栏消息" id=11236: title, content, click_action_type and
    // click_action_url, action_parameters, channel_id, off_line_ttl, notify_id, app_message_id;
    // "消息分类": category and notify_level).
    @Test func anOPPOPhoneIsShownANotificationOfItsClassAndItsAppReadsTheData() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f)
        let regID = try await registerOPPO(f, "find-x")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', ttl => interval '2 hours', message_class => 'service',
                               deep_link => 'https://shop.example/orders/42')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "find-x")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's other phones go through FCM")
        let received = try #require(await f.emulator.oppoReceived.first)
        #expect(sent.name == received.messageID, "OPPO's message id is kept")
        #expect(received.appKey == Self.appKey && received.regID == regID)
        #expect(received.message["target_type"] as? Int == 2)
        let n = received.notification
        #expect(n["title"] as? String == "Shipped" && n["content"] as? String == "Parcel 42")
        #expect(n["channel_id"] as? String == "orders", "a service notification goes in the private channel")
        #expect(n["category"] as? String == "ORDER" && n["notify_level"] as? Int == 2, "and the lock screen")
        #expect(
            n["click_action_type"] as? Int == 2 && n["click_action_url"] as? String == "https://shop.example/orders/42")
        #expect((7000...7200).contains(n["off_line_ttl"] as? Int ?? 0), "\(n)")
        #expect(n["off_line"] as? Bool == true && n["notify_id"] as? Int != nil)
        #expect((n["app_message_id"] as? String)?.hasPrefix("herald-") == true)
        let parameters = received.parameters
        #expect(parameters["order"] == "42" && parameters["title"] == "Shipped")
        let reference = try #require(parameters["herald_report"])
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
        #expect(await f.emulator.oppoAuthRequests == 1)
        _ = secret
    }

    /// A marketing notification goes in the public channel, of category MARKETING, in the
    /// notification bar only; a title too long for OPPO is shortened and a TTL held to its ten
    /// days; a silent notification fails, unsent (OPPO has no pass-through message); a dry run is
    /// built, not sent.
    @Test func marketingLongSilentAndDryRunNotificationsGoAsOPPOTakesThem() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f)
        _ = try await registerOPPO(f, "find-x")
        let long = String(repeating: "Sale! ", count: 20)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => $1, ttl => interval '20 days', deep_link => 'shop://sale')",
            [long])
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', data => '{\"sync\": \"inbox\"}', silent => true)")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        let rows = try await f.db.query("SELECT state, coalesce(last_error, '') FROM herald.deliveries ORDER BY id")
        let states = try rows.map { try $0.decode(0, as: String.self) }
        #expect(states == ["sent", "failed", "validated"])
        #expect(try rows[1].decode(1, as: String.self).contains("pass-through"))
        let received = await f.emulator.oppoReceived
        #expect(received.count == 1)
        let n = try #require(received.first?.notification)
        #expect(n["channel_id"] as? String == "news" && n["category"] as? String == "MARKETING")
        #expect(n["notify_level"] as? Int == 1)
        #expect((n["title"] as? String)?.count == OPPOMessage.longestTitle)
        #expect(n["content"] as? String == long, "a body not given takes the title's text, whole")
        #expect(n["click_action_type"] as? Int == 5 && n["click_action_url"] as? String == "shop://sale")
        #expect(n["off_line_ttl"] as? Int == OPPOMessage.longestTTL, "OPPO keeps a message at most 10 days")
        _ = secret
    }

    /// Before any send with the app's key was accepted, 10000 may mean the key is another app's:
    /// it is the app's configuration, and no phone is disabled.
    @Test func anInvalidRegistrationIDBeforeTheKeyIsProvenDisablesNoPhone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f)
        let dead = try await registerOPPO(f, "old-find")
        await f.emulator.setBehaviour(.unregistered, forToken: dead)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        try await f.expectHeldBackForItsSetup("old-find", saying: "10000", scope: "oppo")
        _ = secret
    }

    /// A registration id OPPO calls invalid (10000) disables that phone alone, once a send with
    /// the app's key has been accepted.
    @Test func anInvalidRegistrationIDDisablesItsPhoneAlone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f)
        let dead = try await registerOPPO(f, "old-find")
        _ = try await registerOPPO(f, "reno", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: dead)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.dispatch()
        let refused = try await f.delivery(of: "old-find")
        #expect(refused.state == "token_invalid" && refused.error?.contains("10000") == true, "\(refused)")
        #expect(try await f.delivery(of: "reno").state == "sent")
        let disabled = try await f.db.query("SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(try disabled.map { try $0.decode(0, as: String.self) } == ["old-find"])
        _ = secret
    }

    /// A master secret OPPO's auth endpoint refuses (16, invalid signature) is the app's
    /// configuration, scoped to OPPO Push: its OPPO phones wait, its other phones are sent, no
    /// phone is disabled. An auth token OPPO stops taking (11) is fetched again and the message
    /// sent.
    @Test func aRefusedSecretHoldsBackOnlyTheAppsOPPOPhonesAndAnExpiredTokenIsFetchedAgain() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f, secret: "a-wrong-secret")
        _ = try await registerOPPO(f, "find-x")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        try await f.expectHeldBackForItsSetup("find-x", saying: "16 Invalid Signature", scope: "oppo")
        #expect(
            try await f.delivery(of: "find-x").error?.contains("a-wrong-secret") == false, "the secret is never said")

        let fixed = try SecretFile(contents: "the-master-secret", suffix: ".secret")
        try await f.db.query("UPDATE herald.app_oppo SET master_secret_file = $1", [fixed.path])
        try await f.probeAgain()
        #expect(try await f.delivery(of: "find-x").state == "sent")
        await f.emulator.expireOPPOAuthTokens()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'again')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.oppoReceived.count == 2)
        #expect(await f.emulator.oppoAuthRequests == 3, "the refused secret's, the fixed one's, the fresh one")
        _ = secret
    }

    /// OPPO's daily limit of the public channel (33) holds back what goes through it until
    /// midnight in China, without spending attempts, on every daemon: the app's marketing waits,
    /// its service notifications, through the private channel, go. Flow control (-2) holds back
    /// all the app's sends a moment.
    @Test func theDailyLimitHoldsBackOnlyThePublicChannelAndFlowControlTheAppWithoutSpendingAttempts()
        async throws
    {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await oppoApp(f, publicDailyLimit: 1)
        _ = try await registerOPPO(f, "find-x")
        _ = try await registerOPPO(f, "reno", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'sale')")
        try await f.ingest()
        try await f.dispatch()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'another sale')")
        try await f.ingest()
        try await f.dispatch()
        let rows = try await f.db.query(
            "SELECT d.state, d.attempts, coalesce(d.last_error, ''), d.run_at FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id ORDER BY n.id"
        )
        #expect(try rows.map { try $0.decode(0, as: String.self) } == ["sent", "queued"])
        #expect(try rows[1].decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try rows[1].decode(2, as: String.self).contains("33"))
        let wait = try rows[1].decode(3, as: Date.self).timeIntervalSince(clock.now())
        #expect(abs(wait - ChinaTime.untilMidnight(clock.now()).seconds) < 0.001)

        // Bob's marketing waits unsent, on another daemon too; his service notification goes.
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'also a sale')")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'your code', message_class => 'service')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        let paused = try await f.db.query("SELECT account FROM herald.quota_pauses WHERE provider = 'oppo'")
        #expect(try paused.map { try $0.decode(0, as: String.self) } == ["app shop (public)"])
        #expect(await f.emulator.oppoReceived.map { $0.notification["title"] as? String } == ["sale", "your code"])

        let busy = try await registerOPPO(f, "find-n", user: "carol")
        await f.emulator.setBehaviour(.unavailable(retryAfter: nil), forToken: busy, times: 1)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'carol', title => 'order', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        let rate = try await f.db.query(
            "SELECT attempts, last_error FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id WHERE n.title = 'order'"
        )[0]
        #expect(try rate.decode(0, as: Int.self) == 0 && (try rate.decode(1, as: String.self)).contains("-2"))
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'held too', message_class => 'service')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        #expect(await f.emulator.oppoReceived.count == 2, "flow control holds back every daemon's sends")
        clock.advance(by: .seconds(1))
        try await f.dispatch()
        let titles = await f.emulator.oppoReceived.compactMap { $0.notification["title"] as? String }
        #expect(Set(titles) == ["sale", "your code", "order", "held too"] && titles.count == 4)
        _ = secret
    }

    /// A message OPPO refuses for good fails alone, in OPPO's words; the phone stays.
    @Test func aRefusedMessageFailsAloneInOPPOsWords() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await oppoApp(f)
        let regID = try await registerOPPO(f, "find-x")
        _ = try await registerOPPO(f, "reno")
        await f.emulator.setBehaviour(.garbledAnswer, forToken: regID)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let failed = try await f.delivery(of: "find-x")
        #expect(failed.state == "failed" && failed.error?.contains("41") == true, "\(failed)")
        #expect(try await f.delivery(of: "reno").state == "sent")
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        _ = secret
    }

    /// Each of OPPO's documented codes to its outcome (the SDK's `ReturnCode.ErrorCode`).
    @Test func eachCodeHasItsOutcome() {
        func outcome(_ code: Int) -> PushOutcome {
            let response = HTTPResponse(
                status: 200, headers: [], body: Array(#"{"code":\#(code),"message":"m"}"#.utf8))
            return OPPOResult(response, regID: "r").outcome(untilTomorrow: .seconds(100))
        }
        func kind(_ outcome: PushOutcome) -> String {
            switch outcome {
            case .sent: "sent"
            case .tokenInvalid: "token"
            case .configurationError(_, let scope): "config \(scope.rawValue)"
            case .overQuota(let after, _): "quota \(Int(after.seconds))"
            case .retry: "retry"
            case .permanentFailure: "failed"
            }
        }
        #expect(kind(outcome(0)) == "sent")
        #expect(kind(outcome(10000)) == "token")
        #expect(kind(outcome(33)) == "quota 100", "until midnight in China")
        #expect(kind(outcome(-2)) == "quota 1" && kind(outcome(13)) == "quota 1")
        for code in [11, 14, 15, 26, 27, 28, 29, 30] { #expect(kind(outcome(code)) == "config oppo", "\(code)") }
        #expect(kind(outcome(-1)) == "retry" && kind(outcome(-3)) == "retry")
        for code in [12, 40, 41, 31, 32] { #expect(kind(outcome(code)) == "failed", "\(code)") }
        #expect(kind(outcome(77)) == "retry", "a code Herald does not know is tried again")
    }

    /// OPPO keeps a message an hour to ten days: a longer TTL is held to ten days, and one under an
    /// hour is not kept for a phone that is off (shown now or never, not after it expired).
    @Test func theTTLIsHeldToOPPOsRange() {
        func offline(_ seconds: Int) -> [String: JSONValue] {
            let message = OPPOMessage(
                regID: "r", title: "t", content: "c", tap: .openApp, actionParameters: "{}", channelID: nil,
                category: "MARKETING", notifyLevel: 1, notifyID: 1, appMessageID: "a", ttl: seconds)
            return Dictionary(message.notification.filter { $0.0.hasPrefix("off_line") }) { $1 }
        }
        #expect(offline(0) == ["off_line": .bool(false)] && offline(3599) == ["off_line": .bool(false)])
        #expect(offline(3600) == ["off_line": .bool(true), "off_line_ttl": .int(3600)])
        #expect(offline(30 * 86_400) == ["off_line": .bool(true), "off_line_ttl": .int(864_000)], "ten days at most")
    }

    /// OPPO Push reaches a phone through its region's host; a stand-in's base replaces it. The
    /// auth request's sign is the SDK's (`Auth.getSign`).
    @Test func eachRegionHasItsHostAndTheSignIsOPPOs() {
        let http = HTTPClient()
        let url = { (region: OPPOPushClient.Region, endpoint: String?) in
            OPPOPushClient(
                appKey: "k", masterSecret: "s", region: region, endpoint: endpoint, http: http
            ).sendURL
        }
        #expect(url(.china, nil) == "https://api.push.oppomobile.com/server/v1/message/notification/unicast")
        #expect(
            url(.international, nil) == "https://api-intl.push.oppomobile.com/server/v1/message/notification/unicast")
        #expect(url(.china, "http://127.0.0.1:9/") == "http://127.0.0.1:9/server/v1/message/notification/unicast")
        // sha256("key" + "1700000000000" + "secret"), in lower-case hex (Python's hashlib).
        #expect(
            OPPOPushClient.sign(appKey: "key", timestamp: 1_700_000_000_000, masterSecret: "secret")
                == "ee412f504f93d283888979ab4f37e98beb471243575d468a4048c57285abad84")
    }
}
