import Foundation
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Xiaomi phones through Mi Push's stand-in, which checks each request as Xiaomi documents it
/// (``XiaomiService``): the AppSecret and package name, the form's fields and lengths, the tap
/// action Mi Push requires, the app's registered channels and Mi Push's error codes.
@Suite struct XiaomiDispatchTests {
    static let packageName = "com.example.shop"

    /// The fixture's app `shop` with a Mi Push setup the stand-in trusts (or, with `secret`,
    /// another), its channels `orders` (private) and `news` (public) set for its service and
    /// marketing notifications; the secret's file is kept for the test's lifetime.
    func xiaomiApp(_ f: WorkerFixture, secret: String = "the-app-secret==") async throws -> SecretFile {
        await f.emulator.registerXiaomiApp(
            packageName: Self.packageName, secret: "the-app-secret==", channels: ["orders": true, "news": false])
        let file = try SecretFile(contents: secret + "\n", suffix: ".secret")
        try await f.db.query(
            """
            INSERT INTO herald.app_xiaomi (app_id, app_secret_file, package_name, service_channel_id, marketing_channel_id)
            VALUES ('shop', $1, $2, 'orders', 'news')
            """, [file.path, Self.packageName])
        return file
    }

    func registerXiaomi(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let regID =
            "d//igwEhgBGCI2TG6lWqlK" + String(repeating: "Q", count: 20)
            + device.replacingOccurrences(of: "-", with: "_")
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'xiaomi_regid')", [device, regID, user])
        return regID
    }

    func states(_ f: WorkerFixture) async throws -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: try await f.db.query(
                "SELECT v.device_id, d.state FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id"
            ).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self)) })
    }

    @Test func aXiaomiPhoneIsShownANotificationInItsClassChannelAndItsAppReadsThePayload() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await xiaomiApp(f)
        let regID = try await registerXiaomi(f, "redmi")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', ttl => interval '2 hours', message_class => 'service',
                               deep_link => 'https://shop.example/orders/42')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "redmi")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's other phones go through FCM")
        let received = try #require(await f.emulator.xiaomiReceived.first)
        #expect(sent.name == received.messageID, "Mi Push's message id is kept")
        let fields = received.fields
        #expect(received.regID == regID && fields["restricted_package_name"] == Self.packageName)
        #expect(fields["pass_through"] == "0" && fields["title"] == "Shipped" && fields["description"] == "Parcel 42")
        #expect(fields["extra.channel_id"] == "orders", "a service notification goes in the app's private channel")
        #expect(fields["extra.notify_effect"] == "3" && fields["extra.web_uri"] == "https://shop.example/orders/42")
        #expect((7_000_000...7_200_000).contains(Int(fields["time_to_live"] ?? "") ?? 0), "\(fields)")
        #expect(Int(fields["notify_id"] ?? "") != nil, "a repeated send replaces the notification")
        let payload = received.payload
        #expect(payload["order"] == "42" && payload["title"] == "Shipped")
        let reference = try #require(payload["herald_report"])
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
        _ = secret
    }

    /// A marketing notification goes in the app's public channel and is kept at most a day (Mi
    /// Push's limit for it); a title too long for Mi Push is shortened; a silent notification is
    /// a pass-through message; a dry run is built, not sent (Mi Push has no validate-only call).
    @Test func marketingSilentLongAndDryRunNotificationsGoAsMiPushTakesThem() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await xiaomiApp(f)
        _ = try await registerXiaomi(f, "redmi")
        let long = String(repeating: "Sale! ", count: 30)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => $1, ttl => interval '5 days', deep_link => 'shop://sale')",
            [long])
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', data => '{\"sync\": \"inbox\"}', silent => true)")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        let states = try await f.db.query("SELECT state FROM herald.deliveries ORDER BY id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["sent", "sent", "validated"])
        let received = await f.emulator.xiaomiReceived.sorted {
            ($0.payload["herald_notification_id"] ?? "") < ($1.payload["herald_notification_id"] ?? "")
        }
        #expect(received.count == 2)
        let marketing = received[0].fields
        #expect(marketing["extra.channel_id"] == "news")
        #expect(marketing["title"]?.count == MiPushMessage.longestTitle && marketing["title"]?.hasSuffix("…") == true)
        #expect(marketing["description"]?.count == MiPushMessage.longestDescription)
        #expect(marketing["extra.notify_effect"] == "2" && marketing["extra.intent_uri"] == "shop://sale")
        #expect(marketing["time_to_live"] == "86400000", "a public message is kept at most a day")
        let silent = received[1].fields
        #expect(silent["pass_through"] == "1" && silent["title"] == nil && silent["extra.channel_id"] == nil)
        #expect(received[1].payload["sync"] == "inbox" && received[1].payload["herald_silent"] == "1")
        _ = secret
    }

    /// A regId Mi Push says is no valid target disables that phone alone, once a send with the
    /// secret has been accepted: before that, it may be the secret that is another app's, and no
    /// phone is disabled. Whether it was accepted is every daemon's knowledge.
    @Test func aDeadRegIDDisablesItsPhoneOnceTheSecretIsProven() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await xiaomiApp(f)
        let dead = try await registerXiaomi(f, "old-redmi")
        await f.emulator.setBehaviour(.unregistered, forToken: dead)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "old-redmi").state == "queued")
        let problem = try await f.db.query("SELECT scope, config_error FROM herald.app_problems")
        #expect(problem.count == 1)
        #expect(try problem[0].decode(1, as: String.self).contains("herald.app_xiaomi.app_secret_file"))
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)

        // Bob's phone is the next probe, and it is accepted: the secret is this app's.
        _ = try await registerXiaomi(f, "poco", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.probeAgain(only: "poco")
        #expect(try await f.delivery(of: "poco").state == "sent")
        #expect(try await f.db.query("SELECT 1 FROM herald.accepted_credentials WHERE provider = 'xiaomi'").count == 1)

        // A daemon started since knows it: Alice's dead phone is disabled at its next try.
        let restarted = await f.restartedContext()
        try await f.db.query("UPDATE herald.app_config_problems SET failed_at = now() - interval '61 seconds'")
        try await f.db.query("UPDATE herald.deliveries SET run_at = now() - interval '1 second' WHERE state = 'queued'")
        try await DispatchWorker(context: restarted).drain()
        let refused = try await f.delivery(of: "old-redmi")
        #expect(refused.state == "token_invalid" && refused.error?.contains("20301") == true, "\(refused)")
        let disabled = try await f.db.query("SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(try disabled.map { try $0.decode(0, as: String.self) } == ["old-redmi"])
        _ = secret
    }

    /// A secret Mi Push refuses (21301) is the app's configuration, scoped to Mi Push: its Xiaomi
    /// phones wait, its other phones are sent, no phone is disabled.
    @Test func aRefusedSecretHoldsBackOnlyTheAppsXiaomiPhones() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await xiaomiApp(f, secret: "a-wrong-secret")
        _ = try await registerXiaomi(f, "redmi")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        try await f.expectHeldBackForItsSetup("redmi", saying: "21301", scope: "xiaomi")
        _ = secret
    }

    /// Mi Push's daily quota (200001) holds back the class it is for until midnight in China,
    /// without spending attempts: the app's marketing waits, its service notifications go (a
    /// private channel has no quota). Calls too frequent (10027) hold back the app's sends a
    /// moment.
    @Test func theDailyQuotaHoldsBackOnlyItsClassAndTheRateTheAppWithoutSpendingAttempts() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await xiaomiApp(f)
        let full = try await registerXiaomi(f, "redmi")
        _ = try await registerXiaomi(f, "poco", user: "bob")
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: nil), forToken: full, times: 1)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'sale')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query("SELECT state, attempts, last_error, run_at FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "queued")
        #expect(try row.decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try row.decode(2, as: String.self).contains("200001"))
        let wait = try row.decode(3, as: Date.self).timeIntervalSince(clock.now())
        #expect(abs(wait - ChinaTime.untilMidnight(clock.now()).seconds) < 0.001)
        // Bob's marketing waits unsent, on another daemon too; his service notification goes.
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'also a sale')")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'bob', title => 'your code', message_class => 'service')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        let paused = try await f.db.query("SELECT provider, account, reason FROM herald.quota_pauses")
        #expect(paused.count == 1)
        #expect(try paused.first?.decode(1, as: String.self) == "app shop (marketing)")
        #expect(await f.emulator.xiaomiReceived.map { $0.fields["title"] } == ["your code"])

        await f.emulator.setBehaviour(.unavailable(retryAfter: nil), forToken: full, times: 1)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'order', message_class => 'service')")
        try await f.ingest()
        try await f.dispatch()
        let rate = try await f.db.query(
            "SELECT attempts, last_error FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id WHERE n.title = 'order'"
        )[0]
        #expect(try rate.decode(0, as: Int.self) == 0 && (try rate.decode(1, as: String.self)).contains("10027"))
        clock.advance(by: .seconds(1))
        try await f.dispatch()
        #expect(await f.emulator.xiaomiReceived.map { $0.fields["title"] } == ["your code", "order"])
        _ = secret
    }

    /// A message Mi Push refuses for good fails alone, in Mi Push's words; the phone stays.
    @Test func aRefusedMessageFailsAloneInXiaomisWords() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await xiaomiApp(f)
        let regID = try await registerXiaomi(f, "redmi")
        _ = try await registerXiaomi(f, "poco")
        await f.emulator.setBehaviour(.garbledAnswer, forToken: regID)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let failed = try await f.delivery(of: "redmi")
        #expect(failed.state == "failed" && failed.error?.contains("10017") == true, "\(failed)")
        #expect(try await f.delivery(of: "poco").state == "sent")
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        _ = secret
    }

    /// Mi Push reaches a phone only through its region's host; a stand-in's base replaces it.
    @Test func eachRegionHasItsHost() {
        let http = HTTPClient()
        let url = { (region: MiPushClient.Region, endpoint: String?) in
            MiPushClient(appSecret: "s", region: region, endpoint: endpoint, http: http).sendURL
        }
        #expect(url(.china, nil) == "https://api.xmpush.xiaomi.com/v3/message/regid")
        #expect(url(.europe, nil) == "https://fr-api.xmpush.global.xiaomi.com/v3/message/regid")
        #expect(url(.singapore, nil) == "https://sgp-api.xmpush.global.xiaomi.com/v3/message/regid")
        #expect(url(.russia, "http://127.0.0.1:9/") == "http://127.0.0.1:9/v3/message/regid")
    }

    /// China's midnight, when the daily quotas start again, is 16:00 UTC.
    @Test func chinasDayEndsAtFourPMUTC() throws {
        let utc = { (text: String) in try #require(ISO8601DateFormatter().date(from: text)) }
        #expect(ChinaTime.untilMidnight(try utc("2026-12-04T15:59:59Z")) == .seconds(1))
        #expect(ChinaTime.untilMidnight(try utc("2026-12-04T16:00:00Z")) == .seconds(86_400))
        #expect(ChinaTime.untilMidnight(try utc("2026-12-04T04:00:00Z")) == .seconds(12 * 3600))
        #expect(ChinaTime.intoDay(try utc("2026-12-04T01:30:00Z")) == 9.5 * 3600)
    }
}
