import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Testing

/// Whatever a producer or a device gives, it fails only itself: refused where it enters, or
/// ended with a reason, while the app's other notifications and devices go on. Each test is a
/// way one hostile value used to hold back others (migration 015 and the dispatch path).
@Suite struct HostileInputTests {
    /// What became of notification `id`: its state and reason.
    func notification(_ id: Int64, in f: WorkerFixture) async throws -> (state: String, reason: String?) {
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [id])[0]
        return (try row.decode(0), try row.decode(1, as: String?.self))
    }

    func send(_ f: WorkerFixture, _ arguments: String) async throws -> Int64 {
        try await f.db.query("SELECT herald.send('shop', \(arguments))")[0].decode(0, as: Int64.self)
    }

    func configurationProblems(_ f: WorkerFixture) async throws -> Int {
        try await f.db.query("SELECT count(*) FROM herald.app_config_problems")[0].decode(0, as: Int.self)
    }

    @Test func timesOutOfRangeAreRejectedAtIngestWithTheFieldNamed() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        let cases: [(String, String)] = [
            ("title => 'x', expires_at => '10000-01-01'", "expires_at 10000-01-01"),
            ("title => 'x', expires_at => '2100-01-01'", "more than 28 days after"),
            ("title => 'x', expires_at => 'infinity'", "expires_at must be a finite time"),
            ("title => 'x', send_at => 'infinity'", "send_at must be a finite time"),
            ("title => 'x', send_at => now() + interval '2 years'", "send_at"),
        ]
        var ids: [Int64] = []
        for (arguments, _) in cases { ids.append(try await send(f, "user_ref => 'alice', \(arguments)")) }
        let healthy = try await send(
            f, "user_ref => 'alice', title => 'fine', expires_at => now() + interval '27 days'")
        try await f.ingest()
        for (id, (arguments, expected)) in zip(ids, cases) {
            let outcome = try await notification(id, in: f)
            #expect(outcome.state == "rejected", "\(arguments)")
            #expect(outcome.reason?.contains(expected) == true, "\(arguments): \(outcome.reason ?? "")")
        }
        #expect(try await notification(healthy, in: f).state == "accepted")
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
    }

    /// A row the claim cannot read, or one whose times are at PostgreSQL's edge, fails (or is
    /// sent) alone; it used to fail the whole claim, and the batch was re-leased forever.
    @Test func theClaimGoesOnPastARowItCannotRead() async throws {
        let f = try await WorkerFixture.make()
        for device in ["a", "b", "c"] { try await f.register(device, "android", user: device) }
        let far = try await send(f, "user_ref => 'a', title => 'far'")
        let broken = try await send(f, "user_ref => 'b', title => 'broken'")
        let healthy = try await send(f, "user_ref => 'c', title => 'healthy'")
        try await f.ingest()
        // As a row written before ingest checked it (or by hand) can be: a year PostgreSQL
        // prints with five digits, and a NULL where ingest always writes a value.
        try await f.db.execute("UPDATE herald.notifications SET expires_at = '10000-01-01' WHERE id = \(far)")
        try await f.db.execute("UPDATE herald.notifications SET priority = NULL WHERE id = \(broken)")
        try await f.dispatch()

        #expect(try await f.delivery(of: "c").state == "sent", "notification \(healthy)")
        let farDelivery = try await f.delivery(of: "a")
        #expect(farDelivery.state == "sent", "\(farDelivery)")
        // FCM takes at most 28 days of android.ttl.
        let android = try #require(await f.message(to: "token-a")?["android"] as? [String: Any])
        #expect(android["ttl"] as? String == "2419200s", "\(android)")
        let brokenDelivery = try await f.delivery(of: "b")
        #expect(brokenDelivery.state == "failed", "\(brokenDelivery)")
        #expect(brokenDelivery.error?.contains("could not be read") == true, "\(brokenDelivery)")
        let queued = try await f.db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'queued'")[0]
        #expect(try queued.decode(0, as: Int.self) == 0)
    }

    @Test func aBrowserKeyOffTheCurveIsRefusedAndAnOldOneDisablesOnlyItsDevice() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await f.registerBrowser("good")
        let endpoint = try await f.registerBrowser("bad", user: "bob")
        // 65 bytes, 0x04 first, not on P-256: refused at the door.
        let offCurve = [UInt8]([4]) + [UInt8](repeating: 1, count: 64)
        let json =
            #"{"endpoint": "\#(endpoint)", "keys": {"p256dh": "\#(Self.base64url(offCurve))", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}}"#
        let error = await #expect(throws: PostgresError.self) {
            try await f.db.query("SELECT herald.register_device('shop', 'bad2', 'web', $1)", [json])
        }
        #expect(error?.message.contains("not a point on P-256") == true, "\(error?.message ?? "")")
        // One registered before that check: its device fails alone, and is disabled.
        try await f.db.query(
            "UPDATE herald.devices SET web_p256dh = $1 WHERE device_id = 'bad'", [Data(offCurve)])
        for user in ["bob", "alice", "bob", "alice"] {
            _ = try await send(f, "user_ref => '\(user)', title => 'hi'")
        }
        try await f.ingest()
        try await f.dispatch()
        let good = try await f.db.query(
            """
            SELECT count(*) FILTER (WHERE d.state = 'sent'), count(*) FROM herald.deliveries d
            JOIN herald.devices dev ON dev.id = d.device_id WHERE dev.device_id = 'good'
            """)[0]
        #expect(try good.decode(0, as: Int.self) == 2 && good.decode(1, as: Int.self) == 2)
        #expect(try await f.delivery(of: "bad").state != "queued")
        let disabled = try await f.db.query(
            "SELECT disabled_cause, disabled_reason FROM herald.devices WHERE device_id = 'bad'")[0]
        #expect(try disabled.decode(0, as: String?.self) == "token_invalid")
        #expect(try disabled.decode(1, as: String?.self)?.contains("P-256") == true)
        #expect(try await configurationProblems(f) == 0)
    }

    @Test func controlCharactersNeverReachAnAPNsHeader() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        try await f.registerIPhone("other", user: "bob")
        let injected = try await send(
            f, #"user_ref => 'alice', title => 'x', collapse_key => E'k\r\napns-topic: com.evil.app'"#)
        let tooLong = try await send(f, "user_ref => 'alice', title => 'x', collapse_key => repeat('k', 65)")
        let category = try await send(f, "user_ref => 'alice', title => 'x', ios_category => repeat('c', 5000)")
        try await f.ingest()
        #expect(try await notification(injected, in: f).reason?.contains("collapse_key") == true)
        #expect(try await notification(tooLong, in: f).reason?.contains("collapse_key") == true)
        #expect(try await notification(category, in: f).reason?.contains("payload is about") == true)

        // A row from before that check: the payload builder digests the key into a safe header
        // (the HTTP layer's own refusal is HostileRequestTests'), and both iPhones get theirs.
        let old = try await send(f, "user_ref => 'alice', title => 'old', collapse_key => 'fine'")
        _ = try await send(f, "user_ref => 'bob', title => 'other'")
        try await f.ingest()
        try await f.db.execute(
            #"UPDATE herald.notifications SET collapse_key = E'k\r\napns-topic: com.evil.app' WHERE id = \#(old)"#)
        try await f.dispatch()
        #expect(try await f.delivery(of: "iphone").state == "sent")
        #expect(try await f.delivery(of: "other").state == "sent")
        for received in await f.emulator.apnsReceived {
            #expect(received.headers["apns-topic"] == WorkerFixture.bundleID)
            for (name, value) in received.headers {
                #expect(!value.contains("\r") && !value.contains("\n"), "\(name)")
            }
        }
        #expect(try await configurationProblems(f) == 0)
    }

    @Test func webPushEndpointsAreUntrusted() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        let keys =
            #""keys": {"p256dh": "BHSehLMcX8B5iv4N9MxLc7AL7B04aPj62EFHgdUi7qCvGA0c-olHUWKFyFoMsqe-Quncw_8kHuAuHuFpDZdkEe8", "auth": "AAAAAAAAAAAAAAAAAAAAAA"}"#
        func register(_ endpoint: String) async throws {
            _ = try await f.db.query(
                "SELECT herald.register_device('shop', 'web-x', 'web', $1)",
                [#"{"endpoint": "\#(endpoint)", \#(keys)}"#])
        }
        // The fixture's app allows the stand-in by name and address; a real app allows only
        // the browsers' push services.
        try await f.db.execute(
            "UPDATE herald.app_webpush SET hosts = NULL, private_addresses = false")
        for (endpoint, expected) in [
            ("https://169.254.169.254/latest/meta-data", "is not a push service"),
            ("https://evil.example/collect", "is not a push service"),
            ("https://fcm.googleapis.com/fcm/send/a\\r\\nb", "plain https:// URL"),
            ("https://user@fcm.googleapis.com/fcm/send/a", "plain https:// URL"),
            // Shorthands resolvers read as 127.0.0.1.
            ("https://127.1/x", "plain https:// URL"), ("https://2130706433/x", "plain https:// URL"),
            ("https://0x7f000001/x", "plain https:// URL"),
        ] {
            let error = await #expect(throws: PostgresError.self, "\(endpoint)") { try await register(endpoint) }
            #expect(error?.message.contains(expected) == true, "\(endpoint): \(error?.message ?? "")")
        }
        try await register("https://fcm.googleapis.com/fcm/send/abc")
        try await register("https://updates.push.services.mozilla.com/wpush/v2/abc")
        // The policy itself is checked: an operator's typo cannot break the app's claims.
        for hosts in ["{NULL}", "{\"push .example\"}", "{{a},{b}}"] {
            await #expect(throws: PostgresError.self, "\(hosts)") {
                try await f.db.query("UPDATE herald.app_webpush SET hosts = $1::text[]", [hosts])
            }
        }
        // An app that allows any host still never reaches a private address.
        try await f.db.execute("UPDATE herald.app_webpush SET hosts = '{*}'")
        for endpoint in ["https://10.1.2.3/x", "https://[::1]:8443/x", "https://localhost:8443/x"] {
            let error = await #expect(throws: PostgresError.self, "\(endpoint)") { try await register(endpoint) }
            #expect(error?.message.contains("loopback, private or link-local") == true, "\(error?.message ?? "")")
        }

        // A name that resolves to a private address is refused where Herald connects: DNS
        // cannot route around the rule. (Registered while the app allowed private addresses.)
        try await f.db.execute("UPDATE herald.app_webpush SET hosts = '{*}', private_addresses = true")
        let endpoint = try await f.registerBrowser("chrome")
        try await f.db.execute(
            "UPDATE herald.devices SET push_token = replace(push_token, '127.0.0.1', 'localhost') WHERE device_id = 'chrome'"
        )
        try await f.db.execute("UPDATE herald.app_webpush SET private_addresses = false")
        _ = try await send(f, "user_ref => 'alice', title => 'hi'")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "chrome")
        #expect(delivery.state == "failed", "\(delivery)")
        #expect(delivery.error?.contains("herald.app_webpush.private_addresses") == true, "\(delivery)")
        #expect(await f.emulator.webPushRequests == 0, "nothing reached \(endpoint)")
        #expect(try await configurationProblems(f) == 0)
    }

    @Test func heraldsOwnIdempotencyKeysAreNotTheProducers() async throws {
        let f = try await WorkerFixture.make()
        let error = await #expect(throws: PostgresError.self) {
            _ = try await send(f, "user_ref => 'alice', title => 'x', idempotency_key => 'herald-wakeup-1'")
        }
        #expect(error?.message.contains("herald- are Herald's own") == true, "\(error?.message ?? "")")
        _ = try await send(f, "user_ref => 'alice', title => 'x', idempotency_key => 'my-herald-key'")
    }

    /// A changed FCM project or credentials file takes effect without a restart, as the APNs
    /// and Web Push settings do.
    @Test func changedFCMSettingsTakeEffectAtOnce() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        _ = try await send(f, "user_ref => 'alice', title => 'first'")
        try await f.ingest()
        try await f.dispatch()
        let other = try await f.emulator.makeServiceAccount(projectID: "shop-moved")
        let file = try ServiceAccountFile(other)
        try await f.db.query(
            "UPDATE herald.app_fcm SET project_id = 'shop-moved', credentials_file = $1", [file.path])
        _ = try await send(f, "user_ref => 'alice', title => 'second'")
        try await f.ingest()
        try await f.dispatch()
        let projects = await f.emulator.received.map(\.projectID)
        #expect(projects == ["shop-prod", "shop-moved"], "\(projects)")
    }

    /// A configuration problem that nothing waits on any more is cleared by the retry worker's
    /// pass; one that deliveries still wait on stays.
    @Test func configurationProblemsNothingWaitsOnAreCleared() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.register("iphone", "ios")
        _ = try await send(f, "user_ref => 'alice', title => 'waits'")
        try await f.ingest()
        try await f.db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('idle');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('idle', 'idle-prod');
            INSERT INTO herald.app_config_problems (app_id, scope, problem, since, failed_at) VALUES
                ('idle', 'fcm', 'gone', now() - interval '1 hour', now() - interval '10 minutes'),
                ('shop', 'fcm', 'still needed', now() - interval '1 hour', now() - interval '10 minutes'),
                ('shop', 'web', 'nothing waits', now() - interval '1 hour', now() - interval '10 minutes'),
                ('shop', 'apns', 'just confirmed', now() - interval '1 hour', now());
            """)
        _ = try await RetryWorker(context: f.context).runBatch(limit: 1) { false }
        let left = try await f.db.query("SELECT app_id, scope FROM herald.app_config_problems ORDER BY app_id, scope")
            .map { "\(try $0.decode(0, as: String.self)) \(try $0.decode(1, as: String.self))" }
        #expect(left == ["shop apns", "shop fcm"], "\(left)")
    }

    /// Whatever a provider answers, its text is recorded: a NUL in a reason must not make the
    /// record fail, which would repeat the whole batch's sends when the lease ends.
    @Test func answersWithControlCharactersAreRecordedAndFailOnlyTheirDelivery() async throws {
        let f = try await WorkerFixture.make(webPush: true, apns: true)
        try await f.register("pixel", "android")
        try await f.register("garbled-pixel", "android", user: "bob")
        let iphone = try await f.registerIPhone("garbled-iphone", user: "bob")
        let endpoint = try await f.registerBrowser("garbled-browser", user: "bob")
        for token in ["token-garbled-pixel", iphone, endpoint] {
            await f.emulator.setBehaviour(.garbledAnswer, forToken: token)
        }
        _ = try await send(f, "user_ref => 'bob', title => 'to the garbled'")
        _ = try await send(f, "user_ref => 'alice', title => 'healthy'")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        for device in ["garbled-pixel", "garbled-iphone", "garbled-browser"] {
            let delivery = try await f.delivery(of: device)
            #expect(delivery.state == "failed", "\(device): \(delivery)")
            #expect(delivery.error?.contains("\u{FFFD}") == true, "\(device): \(delivery)")
        }
        #expect(try await configurationProblems(f) == 0)
    }

    /// The principle, beside the findings: a stream of hostile rows of many kinds, alone and in
    /// pairs, interleaved with healthy notifications for healthy devices of the same app, and a
    /// device whose subscription is broken. Every healthy notification is sent in the first
    /// pass, every hostile one is refused or ends final with a reason, no app-wide problem is
    /// raised, and no request leaves with a control character in a header.
    @Test func aStreamOfHostileRowsHoldsBackNoHealthyNotification() async throws {
        let f = try await WorkerFixture.make(webPush: true, apns: true)
        try await f.register("pixel", "android")
        try await f.registerIPhone("iphone")
        try await f.registerBrowser("browser")
        try await f.registerBrowser("broken", user: "bob")
        try await f.db.query(
            "UPDATE herald.devices SET web_p256dh = $1 WHERE device_id = 'broken'",
            [Data([4] + [UInt8](repeating: 7, count: 64))])
        let hostile = [
            "expires_at => '10000-01-01'", "expires_at => 'infinity'", "expires_at => '-infinity'",
            "expires_at => '294276-12-31 23:59:59'", "expires_at => '4713-01-01 BC'", "expires_at => '2100-01-01'",
            "send_at => 'infinity'", "send_at => '294276-01-01'", "send_at => '-infinity'",
            #"collapse_key => E'\r\napns-topic: evil'"#, "collapse_key => repeat('k', 65)", #"collapse_key => E'\x01'"#,
            "ios_category => repeat('c', 5000)", #"ios_category => E'c\r\nx: y'"#, #"ios_thread_id => E't\n'"#,
            #"sound => E's\x07'"#, #"android_channel_id => E'\x1b[31m'"#, #"deep_link => E'app://x\r\n'"#,
            "data => '[1]'", #"data => '{"a": {"b": 1}}'"#, #"data => '{"from": "x"}'"#, #"data => '{"k": "\u0000"}'"#,
            "badge => 2147483647", "badge => -1", "ttl => '-1 day'", "ttl => '29 days'", "priority => 'urgent'",
            "title => repeat('t', 5000)", #"title => E'\x01\x02'"#, "image_url => 'http://plain.example/x.png'",
            "idempotency_key => 'herald-wakeup-7'", #"idempotency_key => E'k\n'"#,
        ]
        var random = SplitMix64(seed: 2026_11_23)
        var healthy: [Int64] = []
        var unhealthy: [(Int64, String)] = []
        var refused = 0
        for round in 0..<40 {
            healthy.append(
                try await send(f, "user_ref => 'alice', title => 'healthy \(round)', collapse_key => 'c\(round)'"))
            for _ in 0..<2 {
                var values = [hostile[Int(random.next() % UInt64(hostile.count))]]
                if random.next() % 2 == 0 { values.append(hostile[Int(random.next() % UInt64(hostile.count))]) }
                if Set(values.map { $0.prefix { $0 != " " } }).count < values.count { values.removeLast() }
                let user = random.next() % 2 == 0 ? "alice" : "bob"
                let arguments = "user_ref => '\(user)', title => 'hostile', \(values.joined(separator: ", "))"
                    .replacingOccurrences(of: "title => 'hostile', title =>", with: "title =>")
                do {
                    unhealthy.append((try await send(f, arguments), arguments))
                } catch is PostgresError {
                    refused += 1  // refused at the door, with PostgreSQL's message
                }
            }
        }
        try await f.ingest()
        try await f.dispatch()

        for id in healthy {
            let states = try await f.db.query(
                "SELECT d.state FROM herald.deliveries d WHERE d.notification_id = $1", [id]
            ).map { try $0.decode(0, as: String.self) }
            #expect(states == ["sent", "sent", "sent"], "healthy notification \(id): \(states)")
        }
        for (id, arguments) in unhealthy {
            let outcome = try await notification(id, in: f)
            let unfinished = try await f.db.query(
                "SELECT count(*) FROM herald.deliveries WHERE notification_id = $1 AND state = 'queued'", [id])[0]
                .decode(0, as: Int.self)
            #expect(unfinished == 0, "\(arguments)")
            if outcome.state != "accepted" {
                #expect(outcome.reason?.isEmpty == false, "\(arguments): \(outcome)")
            }
        }
        #expect(refused > 0 && unhealthy.count > 40, "refused \(refused), kept \(unhealthy.count)")
        #expect(try await configurationProblems(f) == 0)
        for received in await f.emulator.apnsReceived {
            #expect(received.headers["apns-topic"] == WorkerFixture.bundleID)
            #expect(!received.headers.values.contains { $0.contains { $0.asciiValue.map { $0 < 0x20 } ?? false } })
        }
        let broken = try await f.db.query("SELECT disabled_cause FROM herald.devices WHERE device_id = 'broken'")[0]
        #expect(try broken.decode(0, as: String?.self) == "token_invalid")
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// A small seeded generator, so the hostile stream is the same on every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
