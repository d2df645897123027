import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// The producer's SQL contract, from separate connections, as a producer would use it.
@Suite struct ProducerContractTests {
    struct Fixture {
        let database: TestDatabase
        let producer: PostgresConnection
        let herald: PostgresConnection

        func ingestAll() async throws {
            let worker = IngestWorker(
                context: WorkerContext(connection: herald, clock: SystemClock(), logger: Logger(label: "test")))
            try await worker.drain(batchSize: 500)
        }

        func notification(_ id: Int64) async throws -> (state: String, reason: String?) {
            let row = try await herald.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [id])[0]
            return (try row.decode(0), try row.decode(1, as: String?.self))
        }

        func count(_ sql: String) async throws -> Int {
            try await herald.query(sql)[0].decode(0, as: Int.self)
        }
    }

    func fixture() async throws -> Fixture {
        let database = try await TestDatabase.create()
        let herald = try await database.connect()
        try await herald.addApp("shop", fcmProject: "shop-prod")
        try await herald.addApp("blog", fcmProject: "blog-prod")
        return Fixture(database: database, producer: try await database.connect(), herald: herald)
    }

    func register(_ f: Fixture, _ device: String, _ platform: String, _ token: String, user: String? = "alice")
        async throws -> String
    {
        try await f.producer.query(
            "SELECT status FROM herald.register_device('shop', $1, $2, $3, $4)", [device, platform, token, user]
        )[0].decode(0, as: String.self)
    }

    func send(_ f: Fixture, _ arguments: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int64 {
        try await f.producer.query("SELECT herald.send('shop', \(arguments))", parameters)[0].decode(0, as: Int64.self)
    }

    @Test func statementsTakeEffectOnlyWhenTheProducersTransactionCommits() async throws {
        let f = try await fixture()
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await f.producer.transaction { session in
                _ = try session.query("SELECT herald.register_device('shop', 'p1', 'android', 'tok-1', 'alice')")
                _ = try session.query("SELECT herald.send('shop', user_ref => 'alice', title => 'rolled back')")
                throw Abort()
            }
        }
        #expect(try await f.count("SELECT count(*) FROM herald.devices") == 0)
        #expect(try await f.count("SELECT count(*) FROM herald.notifications") == 0)
        #expect(try await f.count("SELECT count(*) FROM herald.jobs") == 0)

        try await f.producer.transaction { session in
            _ = try session.query("SELECT herald.register_device('shop', 'p1', 'android', 'tok-1', 'alice')")
            _ = try session.query("SELECT herald.send('shop', user_ref => 'alice', title => 'committed')")
            _ = try session.query("SELECT herald.unregister_device('shop', 'p1')")
        }
        #expect(try await f.count("SELECT count(*) FROM herald.devices WHERE disabled_cause = 'logout'") == 1)
        #expect(try await f.count("SELECT count(*) FROM herald.notifications WHERE state = 'received'") == 1)
    }

    @Test func badInputIsRejectedWithAReasonAndTheRestOfTheBatchGoesThrough() async throws {
        let f = try await fixture()
        _ = try await register(f, "p1", "android", "tok-1")
        let good = try await send(f, "user_ref => 'alice', title => 'fine'")
        let big = String(repeating: "x", count: 4500)
        let cases: [(String, [any PostgresEncodable], String)] = [
            ("user_ref => 'alice'", [], "nothing to send: give a title, a body or data"),
            (
                "user_ref => 'alice', data => '{\"nested\": {\"a\": 1}}'", [],
                "data value for key 'nested' is a JSON object"
            ),
            ("user_ref => 'alice', data => '[1, 2]'", [], "data must be a JSON object of strings, not a JSON array"),
            ("user_ref => 'alice', data => '{\"from\": \"x\"}'", [], "data key 'from' is reserved by FCM"),
            ("user_ref => 'alice', data => '{\"message_type\": \"x\"}'", [], "data key 'message_type' is reserved"),
            ("user_ref => 'alice', data => '{\"google.sent\": \"x\"}'", [], "data key 'google.sent' is reserved"),
            ("user_ref => 'alice', data => '{\"GCM.x\": \"x\"}'", [], "data key 'GCM.x' is reserved"),
            ("user_ref => 'alice', body => $1", [big], "over the 4096-byte limit of FCM and APNs"),
            (
                "user_ref => 'alice', title => 't', image_url => 'http://example.com/a.png'", [],
                "image_url must be an https:// URL"
            ),
            ("device_ids => '{}', title => 't'", [], "device_ids is empty"),
        ]
        var ids: [(Int64, String)] = []
        for (arguments, parameters, expected) in cases {
            ids.append((try await send(f, arguments, parameters), expected))
        }
        let unknownApp = try await f.producer.query("SELECT herald.send('nope', user_ref => 'alice', title => 't')")[0]
            .decode(0, as: Int64.self)
        ids.append((unknownApp, "unknown app 'nope'"))
        try await f.ingestAll()

        for (id, expected) in ids {
            let row = try await f.notification(id)
            #expect(row.state == "rejected", "notification \(id) should be rejected for: \(expected)")
            #expect(row.reason?.contains(expected) == true, "got \(row.reason ?? "nil"), expected \(expected)")
        }
        #expect(try await f.notification(good).state == "accepted")
        let tooBig = try await f.notification(ids[7].0).reason ?? ""
        #expect(tooBig.range(of: #"about \d+ bytes once encoded, \d+ over"#, options: .regularExpression) != nil)
    }

    /// Ingest measures a payload as JSON prints it, escapes included: a body of quotes takes
    /// twice its length. Ten quotes more or less fall on either side of the 4096 bytes.
    @Test func aPayloadIsMeasuredAsItWillBeEncoded() async throws {
        let f = try await fixture()
        _ = try await register(f, "p1", "android", "tok-1")
        let fits = try await send(f, "user_ref => 'alice', body => $1", [String(repeating: "\"", count: 1960)])
        let over = try await send(f, "user_ref => 'alice', body => $1", [String(repeating: "\"", count: 1970)])
        let plain = try await send(f, "user_ref => 'alice', body => $1", [String(repeating: "x", count: 3900)])
        try await f.ingestAll()
        #expect(try await f.notification(fits).state == "accepted")
        #expect(try await f.notification(plain).state == "accepted")
        let refused = try await f.notification(over)
        #expect(refused.state == "rejected")
        #expect(refused.reason?.contains("payload is about 4114 bytes once encoded, 18 over") == true, "\(refused)")
    }

    @Test func numbersAndBooleansInDataBecomeStrings() async throws {
        let f = try await fixture()
        _ = try await register(f, "p1", "android", "tok-1")
        let id = try await send(f, "user_ref => 'alice', data => '{\"count\": 3, \"ok\": true, \"s\": \"x\"}'")
        try await f.ingestAll()
        let data = try await f.herald.query("SELECT data::text FROM herald.notifications WHERE id = $1", [id])[0]
            .decode(0, as: String.self)
        #expect(data == #"{"s": "x", "ok": "true", "count": "3"}"#)
    }

    @Test(arguments: [
        ("user_ref => 'alice', title => 't', priority => 'urgent'", "priority must be 'high' or 'normal'"),
        ("user_ref => 'alice', title => 't', ttl => '-1 second'", "ttl must be between 0 and 28 days"),
        ("user_ref => 'alice', title => 't', ttl => '29 days'", "ttl must be between 0 and 28 days"),
        ("user_ref => 'alice', title => 't', ttl => '1 hour', expires_at => now()", "give ttl or expires_at, not both"),
        ("user_ref => 'alice', topic => 'news', title => 't'", "exactly one target: user_ref, device_ids or topic"),
        ("title => 't'", "exactly one target: user_ref, device_ids or topic"),
        ("user_ref => 'alice', title => 't', badge => -1", "badge must not be negative"),
    ])
    func callSiteMistakesAreRefusedAtInsert(arguments: String, expected: String) async throws {
        let f = try await fixture()
        let error = await #expect(throws: PostgresError.self) { _ = try await send(f, arguments) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(error?.sqlState == "23514")
    }

    @Test func sameIdempotencyKeyGivesOneNotificationPerApp() async throws {
        let f = try await fixture()
        let first = try await send(f, "topic => 'news', title => 'one', idempotency_key => 'order-42'")
        let again = try await send(f, "topic => 'news', title => 'two', idempotency_key => 'order-42'")
        let otherApp = try await f.producer.query(
            "SELECT herald.send('blog', topic => 'news', title => 'three', idempotency_key => 'order-42')")[0]
            .decode(0, as: Int64.self)
        #expect(first == again)
        #expect(otherApp != first)
        #expect(try await f.count("SELECT count(*) FROM herald.notifications") == 2)
        #expect(try await f.count("SELECT count(*) FROM herald.notifications WHERE state = 'received'") == 2)
    }

    @Test func tokensMoveAndReRegistrationFollowsTheRules() async throws {
        let f = try await fixture()
        #expect(try await register(f, "old-phone", "android", "tok-A") == "registered")
        // The token moves to a new device; the old one is disabled, with why.
        #expect(try await register(f, "new-phone", "android", "tok-A") == "registered")
        let old = try await f.herald.query(
            "SELECT push_token, disabled_cause, disabled_reason FROM herald.devices WHERE device_id = 'old-phone'")[0]
        #expect(try old.decode(0, as: String?.self) == nil)
        #expect(try old.decode(1, as: String.self) == "token_moved")
        #expect(try old.decode(2, as: String.self).contains("new-phone"))

        // FCM declared tok-A dead (the retry worker does this): the same token stays disabled…
        try await f.herald.execute(
            "UPDATE herald.devices SET disabled_at = now(), disabled_cause = 'token_invalid', disabled_reason = '404 UNREGISTERED' WHERE device_id = 'new-phone'"
        )
        #expect(try await register(f, "new-phone", "android", "tok-A") == "token_invalid")
        #expect(
            try await f.count(
                "SELECT count(*) FROM herald.devices WHERE device_id = 'new-phone' AND disabled_at IS NOT NULL") == 1)
        // …and a new token enables it again.
        #expect(try await register(f, "new-phone", "android", "tok-B") == "re-enabled")

        // Logged out: disabled until it registers again, whatever the token.
        _ = try await f.producer.query("SELECT herald.unregister_device('shop', 'new-phone')")
        #expect(
            try await f.count(
                "SELECT count(*) FROM herald.devices WHERE device_id = 'new-phone' AND disabled_cause = 'logout'") == 1)
        #expect(try await register(f, "new-phone", "android", "tok-B") == "re-enabled")

        let error = await #expect(throws: PostgresError.self) { _ = try await register(f, "x", "windows", "tok-C") }
        #expect(
            error?.message.contains("platform must be one of herald.platforms ('android': an Android phone") == true)
    }

    @Test func aBrowserRegistersWithItsSubscriptionAndBadOnesAreExplained() async throws {
        let f = try await fixture()
        // RFC 8291's example keys, as PushSubscription.toJSON() writes them.
        let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        func subscription(
            endpoint: String = "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABkq", p256dh: String = p256dh,
            auth: String = "BTBZMqHH6r4Tts7J_aSIgg"
        ) -> String {
            #"{"endpoint": "\#(endpoint)", "expirationTime": null, "keys": {"p256dh": "\#(p256dh)", "auth": "\#(auth)"}}"#
        }
        #expect(try await register(f, "browser", "web", subscription()) == "registered")
        let row = try await f.herald.query(
            "SELECT push_token, octet_length(web_p256dh), octet_length(web_auth), herald.token_hint(push_token) FROM herald.devices"
        )[0]
        #expect(try row.decode(0, as: String.self) == "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABkq")
        #expect(try row.decode(1, as: Int.self) == 65)
        #expect(try row.decode(2, as: Int.self) == 16)
        #expect(try row.decode(3, as: String.self) == "https://updates.push.services.mozilla.com/…gAAAAABk…")
        // Padded base64url is taken too; a new subscription for the same browser replaces the old.
        #expect(
            try await register(
                f, "browser", "web",
                subscription(endpoint: "https://updates.push.services.mozilla.com/2", auth: "BTBZMqHH6r4Tts7J_aSIgg=="))
                == "registered")
        // Moving to a phone drops the keys.
        #expect(try await register(f, "browser", "android", "tok-android") == "registered")
        #expect(try await f.herald.query("SELECT web_p256dh IS NULL FROM herald.devices")[0].decode(0, as: Bool.self))

        for (token, message) in [
            ("https://updates.push.services.mozilla.com/x", "is the browser's PushSubscription as JSON"),
            (subscription(endpoint: "http://updates.push.services.mozilla.com/x"), "endpoint must be an https:// URL"),
            (subscription(p256dh: String(p256dh.dropLast(4))), "keys.p256dh must be the browser's P-256 public key"),
            (subscription(p256dh: "not base64!"), "keys.p256dh must be"),
            (subscription(auth: "BTBZ"), "keys.auth must be the subscription's 16-byte secret"),
            (#"{"keys": {}}"#, "(no endpoint)"),
        ] {
            let error = await #expect(throws: PostgresError.self) { _ = try await register(f, "bad", "web", token) }
            #expect(error?.message.contains(message) == true, "\(token): \(error?.message ?? "")")
        }
        #expect(try await f.count("SELECT count(*) FROM herald.devices WHERE device_id = 'bad'") == 0)
    }

    @Test func unicodeAndSQLMetacharactersArriveUnchanged() async throws {
        let f = try await fixture()
        let text = "Robert'); DROP TABLE herald.devices;-- 🚀 مرحبا עברית \\ \" %s $1"
        // A collapse key becomes APNs' apns-collapse-id: 64 bytes at most.
        let collapseKey = "'); -- 🚀 עב \\ \" %s $1"
        _ = try await f.producer.query(
            "SELECT herald.register_device('shop', $1, 'ios', $2, $3)", [text, text + "-token", text])
        let id = try await f.producer.query(
            """
            SELECT herald.send('shop', user_ref => $1::text, title => $1, body => $1,
                               data => jsonb_build_object($1::text, $1::text), sound => $1, android_channel_id => $1,
                               ios_category => $1, ios_thread_id => $1, deep_link => $1, collapse_key => $2,
                               image_url => 'https://x/' || $1::text)
            """, [text, collapseKey])[0].decode(0, as: Int64.self)
        try await f.ingestAll()
        #expect(try await f.notification(id).state == "accepted")
        let row = try await f.herald.query(
            """
            SELECT user_ref, title, body, data ->> $2, sound, android_channel_id, ios_category, ios_thread_id,
                   deep_link, collapse_key, image_url
            FROM herald.notifications WHERE id = $1
            """, [id, text])[0]
        for column in 0..<9 { #expect(try row.decode(column, as: String.self) == text, "column \(column)") }
        #expect(try row.decode(9, as: String.self) == collapseKey)
        #expect(try row.decode(10, as: String.self) == "https://x/" + text)
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries") == 1)
    }

    @Test func fanOutReachesEveryEnabledDeviceOfTheUser() async throws {
        let f = try await fixture()
        _ = try await register(f, "pixel", "android", "tok-1")
        _ = try await register(f, "iphone", "ios", "tok-2")
        _ = try await register(f, "ipad", "ios", "tok-3")
        _ = try await f.producer.query("SELECT herald.unregister_device('shop', 'ipad')")
        _ = try await register(f, "bobs-phone", "android", "tok-4", user: "bob")
        let sendAt = Date().addingTimeInterval(3600)
        let alert = try await send(f, "user_ref => 'alice', title => 'hi', send_at => $1", [sendAt])
        let silent = try await send(
            f, "device_ids => '{iphone,pixel,unknown}', silent => true, data => '{\"k\":\"v\"}'")
        try await f.ingestAll()

        let kinds = try await f.herald.query(
            """
            SELECT d.notification_id, dev.device_id, d.payload_kind, d.run_at
            FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
            WHERE d.state = 'queued'
            ORDER BY d.notification_id, dev.device_id
            """
        ).map {
            (
                try $0.decode(0, as: Int64.self), try $0.decode(1, as: String.self), try $0.decode(2, as: String.self),
                try $0.decode(3, as: Date.self)
            )
        }
        #expect(
            kinds.map { "\($0.0):\($0.1):\($0.2)" } == [
                "\(alert):iphone:ios_alert", "\(alert):pixel:android_data",
                "\(silent):iphone:ios_background", "\(silent):pixel:android_data",
            ])
        // Scheduled dispatch waits for send_at; the other goes now.
        #expect(kinds.filter { $0.0 == alert }.allSatisfy { abs($0.3.timeIntervalSince(sendAt)) < 0.001 })
        #expect(kinds.filter { $0.0 == silent }.allSatisfy { $0.3 < Date().addingTimeInterval(5) })
        #expect(try await f.notification(alert).state == "accepted")
    }

    @Test func expiredAndUndeliverableNotificationsEndWithAReason() async throws {
        let f = try await fixture()
        let expired = try await send(f, "user_ref => 'alice', title => 't', expires_at => now() - interval '1 second'")
        let nobody = try await send(f, "user_ref => 'nobody', title => 't'")
        try await f.ingestAll()
        let e = try await f.notification(expired)
        #expect(e.state == "expired")
        #expect(e.reason?.contains("before it could be sent") == true)
        let n = try await f.notification(nobody)
        #expect(n.state == "no_devices")
        #expect(n.reason == "user 'nobody' has no enabled device")
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries") == 0)
    }

    @Test func aRowThatBreaksIngestIsRejectedAndTheRestOfTheBatchGoesThrough() async throws {
        let f = try await fixture()
        _ = try await register(f, "pixel", "android", "tok-1")
        let good = try await send(f, "user_ref => 'alice', title => 'fine'")
        let poison = try await send(f, "user_ref => 'alice', title => 'poison'")
        let alsoGood = try await send(f, "user_ref => 'alice', title => 'also fine'")
        // Stands in for any failure the validation did not foresee.
        try await f.herald.execute(
            "ALTER TABLE herald.deliveries ADD CONSTRAINT poison CHECK (notification_id <> \(poison))")
        try await f.ingestAll()
        #expect(try await f.notification(good).state == "accepted")
        #expect(try await f.notification(alsoGood).state == "accepted")
        let rejected = try await f.notification(poison)
        #expect(rejected.state == "rejected")
        #expect(rejected.reason?.contains("ingest failed") == true)
        #expect(rejected.reason?.contains("poison") == true)
        #expect(try await f.count("SELECT count(*) FROM herald.notifications WHERE state = 'received'") == 0)
    }

    /// A server turned read-only (here: the database, for new sessions) is no bad row: the batch
    /// fails as a whole, nothing is rejected, and once it takes writes again the next batch
    /// ingests it.
    @Test func aReadOnlyServerRejectsNothing() async throws {
        let f = try await fixture()
        _ = try await register(f, "pixel", "android", "tok-1")
        let id = try await send(f, "user_ref => 'alice', title => 't'")
        let worker = IngestWorker(
            context: WorkerContext(connection: f.herald, clock: SystemClock(), logger: Logger(label: "test")))
        try await f.producer.execute("ALTER DATABASE \(f.database.name) SET default_transaction_read_only = on")
        await f.herald.close()
        let failure = await #expect(throws: PostgresError.self) {
            _ = try await worker.runBatch(limit: 10) { false }
        }
        #expect(failure?.isReadOnlyServer == true)
        try await f.producer.execute("ALTER DATABASE \(f.database.name) RESET default_transaction_read_only")
        #expect(try await f.notification(id).state == "received")
        #expect(try await worker.runBatch(limit: 10) { false } == 1)
        #expect(try await f.notification(id).state != "rejected")
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries") == 1)
    }

    /// A lock another session holds (here on the whole deliveries table) rejects nothing: the
    /// app whose notifications meet it is left alone for a while (HeldApps), and they are
    /// ingested once the lock is gone and its wait has passed.
    @Test func aLockTimeoutRejectsNothing() async throws {
        let f = try await fixture()
        _ = try await register(f, "pixel", "android", "tok-1")
        let id = try await send(f, "user_ref => 'alice', title => 't'")
        // A minute ahead of the database's clock, so that what the database made now is due.
        let clock = ManualClock(Date().addingTimeInterval(60))
        let worker = IngestWorker(
            context: WorkerContext(connection: f.herald, clock: clock, logger: Logger(label: "test")))
        let holder = try await f.database.connect()
        try await holder.execute("BEGIN; LOCK TABLE herald.deliveries IN ACCESS EXCLUSIVE MODE")
        #expect(try await worker.runBatch(limit: 10) { false } == 1)
        #expect(try await f.notification(id).state == "received")
        try await holder.execute("COMMIT")
        #expect(try await worker.runBatch(limit: 10) { false } == 0, "left alone for a while")
        clock.advance(by: HeldApps.firstWait + .seconds(1))
        #expect(try await worker.runBatch(limit: 10) { false } == 1)
        #expect(try await f.notification(id).state == "accepted")
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries") == 1)
    }

    @Test func ingestingTheSameBatchTwiceChangesNothing() async throws {
        let f = try await fixture()
        _ = try await register(f, "pixel", "android", "tok-1")
        let id = try await send(f, "user_ref => 'alice', title => 't'")
        _ = try await f.herald.query("SELECT herald.ingest($1::bigint[])", [[id]])
        _ = try await f.herald.query("SELECT herald.ingest($1::bigint[])", [[id]])
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries") == 1)
        #expect(try await f.count("SELECT count(*) FROM herald.deliveries WHERE state = 'queued'") == 1)
    }
}
