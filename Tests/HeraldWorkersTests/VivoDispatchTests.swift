import Foundation
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// vivo phones through vivo Push's stand-in, which checks each request as vivo's server API
/// (doc 362) and its Java server SDK describe it (``VivoService``): the signed auth, the
/// `authToken` header, the body's members and lengths, the tap, the class and its category, the
/// requestId, and vivo's result codes.
@Suite struct VivoDispatchTests {
    static let appID = "105469478"
    static let appKey = "92bfdc4d50751aad58c06df3b5cc38f6"

    /// The fixture's app `shop` with a vivo Push setup the stand-in trusts (or, with `secret`,
    /// another), its service notifications in ORDER; the secret's file is kept for the test's
    /// lifetime.
    func vivoApp(_ f: WorkerFixture, secret: String = "f484f631-58af-41c6", operationLimit: Int = 5) async throws
        -> SecretFile
    {
        await f.emulator.registerVivoApp(
            appID: Self.appID, key: Self.appKey, secret: "f484f631-58af-41c6", operationLimit: operationLimit)
        let file = try SecretFile(contents: secret + "\n", suffix: ".secret")
        try await f.db.query(
            """
            INSERT INTO herald.app_vivo (app_id, vivo_app_id, app_key, app_secret_file, service_category)
            VALUES ('shop', $1, $2, $3, 'ORDER')
            """, [Self.appID, Self.appKey, file.path])
        return file
    }

    func registerVivo(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let regID = "1563853541030100000" + device.replacingOccurrences(of: "-", with: "_")
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'vivo_token')", [device, regID, user])
        return regID
    }

    /// A clock ahead of the database, at `hour` o'clock in China (vivo's day): marketing goes
    /// only from 7:00 to 23:00.
    static func clock(atChinaHour hour: Double) -> ManualClock {
        let now = Date().addingTimeInterval(60)
        let wait = (hour * 3600 - ChinaTime.intoDay(now) + 86_400).truncatingRemainder(dividingBy: 86_400)
        return ManualClock(now.addingTimeInterval(wait))
    }

    /// A clock ahead of the database in vivo's daytime in China: now, or 8:00 if it is night there
    /// (never more than a few hours ahead, so that a notification's default TTL still runs).
    static func daytimeClock() -> ManualClock {
        let now = Date().addingTimeInterval(60)
        let into = ChinaTime.intoDay(now)
        return (8 * 3600...21 * 3600).contains(into) ? ManualClock(now) : clock(atChinaHour: 8)
    }

    @Test func aVivoPhoneIsShownAServiceNotificationAsASystemMessageInItsCategory() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await vivoApp(f)
        let regID = try await registerVivo(f, "x100")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', ttl => interval '2 hours', message_class => 'service',
                               deep_link => 'https://shop.example/orders/42')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "x100")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's other phones go through FCM")
        let received = try #require(await f.emulator.vivoReceived.first)
        #expect(sent.name == received.taskID, "vivo's taskId is kept")
        let body = received.body
        // doc 362, 单推接口: each field as vivo documents it.
        #expect(body["appId"] as? Int == Int(Self.appID), "v2.9.2: the appId, as the SDK sends it (a number)")
        #expect(body["regId"] as? String == regID)
        #expect(body["title"] as? String == "Shipped" && body["content"] as? String == "Parcel 42")
        #expect(body["notifyType"] as? Int == 4, "a service notification rings and vibrates")
        #expect(body["classification"] as? Int == 1 && body["category"] as? String == "ORDER", "a system message")
        #expect(body["skipType"] as? Int == 2 && body["skipContent"] as? String == "https://shop.example/orders/42")
        #expect((7000...7200).contains(body["timeToLive"] as? Int ?? 0), "\(body)")
        #expect(body["networkType"] as? Int == -1 && body["pushMode"] as? Int == 0)
        #expect(body["notifyId"] as? Int != nil, "a repeated send replaces the notification")
        let requestID = try #require(body["requestId"] as? String)
        #expect(requestID.hasPrefix("herald-") && requestID.count <= 64, "one per delivery: a retry is taken once")
        let custom = received.custom
        #expect(custom["order"] == "42" && custom["herald_notification_id"] != nil)
        #expect(
            custom["title"] == nil, "vivo shows the title itself: the data carries the producer's and Herald's keys")
        let reference = try #require(custom["herald_report"])
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
        _ = secret
    }

    /// Marketing goes as an operation message (classification 0, the marketing category, quiet)
    /// in vivo's daytime, a title too wide shortened; at night (23:00 to 7:00 in China, when vivo
    /// delivers no operation message) it waits for 7:00 without spending an attempt, while a
    /// service notification goes at once.
    @Test func marketingGoesByDayAndWaitsTheNightOutWithoutSpendingAnAttempt() async throws {
        let clock = Self.clock(atChinaHour: 23.5)
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await vivoApp(f)
        _ = try await registerVivo(f, "x100")
        let long = String(repeating: "大促销", count: 10)
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => $1, deep_link => 'shop://sale',
                               ttl => interval '3 days')
            """, [long])
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'your code', message_class => 'service',
                               ttl => interval '3 days')
            """)
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.vivoReceived.map { $0.body["title"] as? String } == ["your code"])
        let row = try await f.db.query(
            """
            SELECT d.state, d.attempts, d.run_at FROM herald.deliveries d
            JOIN herald.notifications n ON n.id = d.notification_id WHERE n.message_class IS DISTINCT FROM 'service'
            """)[0]
        #expect(try row.decode(0, as: String.self) == "queued" && (try row.decode(1, as: Int.self)) == 0)
        let wait = try row.decode(2, as: Date.self).timeIntervalSince(clock.now())
        #expect(abs(wait - 7.5 * 3600) < 0.01, "until 7:00 in China")

        clock.advance(by: .seconds(7.5 * 3600 + 1))
        try await f.dispatch()
        let marketing = try #require(await f.emulator.vivoReceived.last?.body)
        #expect(marketing["classification"] as? Int == 0 && marketing["category"] as? String == "MARKETING")
        #expect(marketing["notifyType"] as? Int == 1)
        #expect(marketing["skipType"] as? Int == 4 && marketing["skipContent"] as? String == "shop://sale")
        let title = try #require(marketing["title"] as? String)
        #expect(VivoMessage.width(title) <= 40 && title.hasSuffix("…"), "\(title)")
        #expect(marketing["content"] as? String == long, "the content takes the title's text, 60 wide of its 100")
        _ = secret
    }

    /// vivo has no pass-through message: a silent notification fails at once, unsent; so does
    /// one whose data vivo would refuse (more than 10 keys). A dry run is built, not sent.
    @Test func aSilentNotificationOrTooMuchDataFailsUnsentAndADryRunIsNotSent() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await vivoApp(f)
        _ = try await registerVivo(f, "x100")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', data => '{\"sync\": \"inbox\"}', silent => true)")
        let data = "{" + (1...12).map { "\"k\($0)\": \"v\"" }.joined(separator: ",") + "}"
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', data => $1::jsonb, message_class => 'service')",
            [data])
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true, message_class => 'service')"
        )
        try await f.ingest()
        try await f.dispatch()
        let rows = try await f.db.query("SELECT state, last_error FROM herald.deliveries ORDER BY id").map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String?.self) ?? "")
        }
        #expect(rows.map(\.0) == ["failed", "failed", "validated"])
        #expect(rows[0].1.contains("pass-through") && rows[1].1.contains("clientCustomMap"))
        #expect(await f.emulator.vivoReceived.isEmpty)
        _ = secret
    }

    /// A regId vivo calls invalid (10302) disables that phone alone once a send with the app's
    /// key has been accepted (in the same batch, here); before that, it is the setup that is
    /// doubted, and no phone is disabled.
    @Test func anInvalidRegIDDisablesItsPhoneAloneOnceTheKeyIsProven() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await vivoApp(f)
        let uninstalled = try await registerVivo(f, "old-x100")
        _ = try await registerVivo(f, "x100", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: uninstalled)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "old-x100").state == "queued", "no send accepted yet: the setup is doubted")
        #expect(try await f.db.query("SELECT scope FROM herald.app_problems").count == 1)
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)

        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y', message_class => 'service')")
        try await f.ingest()
        try await f.probeAgain(only: "x100")
        #expect(try await f.delivery(of: "x100").state == "sent")
        try await f.probeAgain()
        let refused = try await f.delivery(of: "old-x100")
        #expect(refused.state == "token_invalid" && refused.error?.contains("10302") == true, "\(refused)")
        let disabled = try await f.db.query("SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(try disabled.map { try $0.decode(0, as: String.self) } == ["old-x100"])
        _ = secret
    }

    /// A secret vivo's auth refuses is the app's configuration, scoped to vivo Push: its vivo
    /// phones wait, its other phones are sent, no phone is disabled. An authToken vivo stops
    /// taking (10000) is fetched again and the message sent.
    @Test func aRefusedSecretHoldsBackOnlyTheAppsVivoPhonesAndAnExpiredAuthTokenIsFetchedAgain() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await vivoApp(f, secret: "a-wrong-secret")
        _ = try await registerVivo(f, "x100")
        try await f.register("pixel", "android")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        try await f.expectHeldBackForItsSetup("x100", saying: "10201", scope: "vivo")
        #expect(try await f.delivery(of: "x100").error?.contains("a-wrong-secret") == false, "no secret in the words")

        let fixed = try SecretFile(contents: "f484f631-58af-41c6", suffix: ".secret")
        try await f.db.query("UPDATE herald.app_vivo SET app_secret_file = $1", [fixed.path])
        try await f.probeAgain()
        #expect(try await f.delivery(of: "x100").state == "sent")
        await f.emulator.expireVivoAuthTokens()
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'again', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.vivoReceived.count == 2)
        #expect(await f.emulator.vivoAuthRequests == 3, "the refused secret's, the fixed one's, the fresh one")
        _ = secret
    }

    /// The app's daily total (10070) holds back the class it is for until midnight in China,
    /// without spending attempts, on every daemon: the app's marketing waits, its service
    /// notifications go. Sends too fast (10072) hold back the app's sends a moment.
    @Test func theDailyTotalHoldsBackOnlyItsClassAndTheRateTheAppWithoutSpendingAttempts() async throws {
        let clock = Self.daytimeClock()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await vivoApp(f)
        let full = try await registerVivo(f, "x100")
        _ = try await registerVivo(f, "y300", user: "bob")
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: nil), forToken: full, times: 1)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'sale')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query("SELECT state, attempts, last_error, run_at FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "queued")
        #expect(try row.decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try row.decode(2, as: String.self).contains("10070"))
        let wait = try row.decode(3, as: Date.self).timeIntervalSince(clock.now())
        #expect(abs(wait - ChinaTime.untilMidnight(clock.now()).seconds) < 0.01)
        // Bob's marketing waits unsent, on another daemon too; his service notification goes.
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'also a sale')")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'your code', message_class => 'service')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        let paused = try await f.db.query("SELECT account, part FROM herald.provider_pauses WHERE provider = 'vivo'")
        #expect(paused.count == 1)
        #expect(try paused.first?.decode(0, as: String.self) == "app shop", "named by Herald's app")
        #expect(try paused.first?.decode(1, as: String.self) == "marketing")
        #expect(await f.emulator.vivoReceived.map { $0.body["title"] as? String } == ["your code"])

        await f.emulator.setBehaviour(.unavailable(retryAfter: nil), forToken: full, times: 1)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'order', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        let rate = try await f.db.query(
            "SELECT attempts, last_error FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id WHERE n.title = 'order'"
        )[0]
        #expect(try rate.decode(0, as: Int.self) == 0 && (try rate.decode(1, as: String.self)).contains("10072"))
        clock.advance(by: .seconds(1))
        try await f.dispatch()
        #expect(await f.emulator.vivoReceived.map { $0.body["title"] as? String } == ["your code", "order"])
        _ = secret
    }

    /// A phone's operation messages for the day spent (10073) hold back that delivery alone until
    /// midnight in China, unspent: the app's other phones still take marketing.
    @Test func aPhonesDailyLimitHoldsBackOnlyThatPhone() async throws {
        let clock = Self.daytimeClock()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await vivoApp(f, operationLimit: 1)
        _ = try await registerVivo(f, "x100")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'first sale')")
        try await f.ingest()
        try await f.dispatch()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'second sale')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query(
            "SELECT d.attempts, d.last_error, d.run_at FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id WHERE n.title = 'second sale'"
        )[0]
        #expect(try row.decode(0, as: Int.self) == 0 && (try row.decode(1, as: String.self)).contains("10073"))
        let wait = try row.decode(2, as: Date.self).timeIntervalSince(clock.now())
        #expect(abs(wait - ChinaTime.untilMidnight(clock.now()).seconds) < 0.01)
        #expect(try await f.db.query("SELECT 1 FROM herald.provider_pauses WHERE provider = 'vivo'").isEmpty)
        _ = try await registerVivo(f, "y300", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'bob sale')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "y300").state == "sent")
        _ = secret
    }

    /// A message vivo refuses for good fails alone, in vivo's words; the phone stays.
    @Test func aRefusedMessageFailsAloneInVivosWords() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await vivoApp(f)
        let regID = try await registerVivo(f, "x100")
        _ = try await registerVivo(f, "y300")
        await f.emulator.setBehaviour(.garbledAnswer, forToken: regID)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        let failed = try await f.delivery(of: "x100")
        #expect(failed.state == "failed" && failed.error?.contains("10056") == true, "\(failed)")
        #expect(try await f.delivery(of: "y300").state == "sent")
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        _ = secret
    }

    /// doc 362's signature: MD5 of appId + appKey + timestamp + appSecret, lower-case hex (the
    /// expected value computed independently, with Python's hashlib).
    @Test func theAuthSignatureIsTheMD5OfTheFourInOrder() {
        let sign = VivoPushClient.sign(
            appID: "10004", appKey: "25509283-3767-4b9e-83fe-b6e55ac6b123", timestamp: 1_501_484_120_000,
            appSecret: "scrt")
        #expect(sign == "3540390f953e56474a00aa8885246320")
        #expect(VivoMessage.shortened("大促销大促销", to: 9) == "大促销…", "a Chinese character counts two")
        #expect(VivoMessage.shortened("short", to: 40) == "short")
    }
}
