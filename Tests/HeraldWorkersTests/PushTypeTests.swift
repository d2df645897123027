import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// APNs' other push types (`herald.send_push`): widgets, VoIP, location and Push to Talk, each
/// to the device's token of that type, against the emulator's APNs behind nginx, which binds
/// each token to its push type's topic as the frameworks do.
@Suite struct PushTypeTests {
    static let types = ["widgets", "voip", "location", "pushtotalk"]

    /// A token of `type` for `device`, hex, that the emulator knows as one.
    static func token(_ type: String, _ device: String) -> String {
        let hex = Array("\(type)-\(device)".utf8).map { String(format: "%02x", $0) }.joined()
        return String((hex + String(repeating: "0", count: 64)).prefix(64))
    }

    @discardableResult
    static func registerToken(_ f: WorkerFixture, _ type: String, device: String = "iphone", bound: Bool = true)
        async throws -> String
    {
        let token = Self.token(type, device)
        if bound { await f.emulator.bindAPNsToken(token, pushType: type) }
        let status = try await f.db.query(
            "SELECT status FROM herald.register_push_type_token('shop', $1, $2, $3)",
            [device, type, token.uppercased()]
        )[0].decode(0, as: String.self)
        #expect(status == "registered")
        return token
    }

    static func pushTypeToken(_ f: WorkerFixture, _ type: String) async throws -> (
        disabled: String?, reason: String?
    ) {
        let row = try await f.db.query(
            """
            SELECT t.disabled_cause, t.disabled_reason FROM herald.push_type_tokens t
            JOIN herald.push_types p ON p.token_kind = t.token_kind WHERE p.push_type = $1
            """, [type])[0]
        return (try row.decode(0, as: String?.self), try row.decode(1, as: String?.self))
    }

    @Test func eachPushTypeReachesItsTokenWithApplesTopicPriorityAndExpiration() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        for type in Self.types { try await Self.registerToken(f, type) }
        var ids: [String: Int64] = [:]
        for type in Self.types {
            ids[type] = try await f.db.query(
                """
                SELECT herald.send_push('shop', $1, user_ref => 'alice', priority => $2,
                                        data => CASE WHEN $1 <> 'widgets' THEN '{"call": "c-7", "video": true}' END::jsonb)
                """, [type, type == "location" ? "normal" : nil])[0].decode(0, as: Int64.self)
        }
        try await f.ingest()
        try await f.dispatch()

        let received = await f.emulator.apnsReceived
        #expect(received.count == 4, "\(received.map(\.headers))")
        let now = Int(Date().timeIntervalSince1970)
        for type in Self.types {
            let push = try #require(received.first { $0.headers["apns-push-type"] == type }, "\(type)")
            #expect(push.deviceToken == Self.token(type, "iphone"), "lower-case hex, the type's own token")
            #expect(push.headers["apns-collapse-id"] == nil)
            let suffix = [
                "widgets": ".push-type.widgets", "voip": ".voip", "location": ".location-query",
                "pushtotalk": ".voip-ptt",
            ][type]!
            #expect(push.headers["apns-topic"] == WorkerFixture.bundleID + suffix)
            switch type {
            case "widgets":
                #expect(push.payload == #"{"aps":{"content-changed":true}}"#)
                #expect(push.headers["apns-priority"] == nil && push.headers["apns-expiration"] == nil)
            case "location":
                #expect(push.headers["apns-priority"] == "5", "a periodic query")
                let expiration = try #require(Int(push.headers["apns-expiration"] ?? ""))
                #expect(abs(expiration - now - 86_400) < 60, "the app's default ttl")
            default:
                #expect(push.headers["apns-priority"] == "10")
                #expect(push.headers["apns-expiration"] == "0", "tried once, never stored: a late call must not ring")
            }
            if type != "widgets" {
                #expect(push.document["aps"] == nil)
                #expect(push.document["call"] as? String == "c-7")
                #expect(push.document["video"] as? String == "true")
                #expect(push.document["herald_notification_id"] as? String == String(ids[type]!))
            }
        }
        let states = try await f.db.query("SELECT DISTINCT state FROM herald.deliveries").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["sent"])
        let expiries = try await f.db.query(
            """
            SELECT push_type, extract(epoch FROM expires_at - created_at)::int FROM herald.notifications
            WHERE push_type IN ('voip', 'pushtotalk') ORDER BY 1
            """
        ).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int.self)) }
        #expect(expiries.map(\.0) == ["pushtotalk", "voip"])
        #expect(abs(expiries[0].1 - 10) <= 1 && abs(expiries[1].1 - 30) <= 1, "\(expiries)")

        // A dry run is built and checked, not sent.
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.apnsReceived.count == 4)
        #expect(
            try await f.db.query("SELECT state FROM herald.deliveries ORDER BY id DESC LIMIT 1")[0].decode(
                0, as: String.self) == "validated")
    }

    /// APNs refusing a VoIP or widget token (410, or DeviceTokenNotForTopic: the app registered
    /// its notification token as one) disables that token alone: the device and its other
    /// tokens go on, and so do its alerts.
    @Test func aRefusedPushTypeTokenDisablesThatTokenOnlyAndAlertsStillGo() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let alertToken = try await f.registerIPhone("iphone")
        let voip = try await Self.registerToken(f, "voip")
        // Not bound at the emulator: as if the app had registered its alert token for widgets.
        try await Self.registerToken(f, "widgets", bound: false)
        try await Self.registerToken(f, "location")
        await f.emulator.setBehaviour(.unregistered, forToken: voip)
        for type in ["voip", "widgets", "location"] {
            _ = try await f.db.query("SELECT herald.send_push('shop', $1, user_ref => 'alice')", [type])
        }
        try await f.ingest()
        try await f.dispatch()

        let voipToken = try await Self.pushTypeToken(f, "voip")
        #expect(voipToken.disabled == "token_invalid")
        #expect(voipToken.reason?.hasPrefix("APNs: APNs answered 410 Unregistered") == true, "\(voipToken)")
        let widgetsToken = try await Self.pushTypeToken(f, "widgets")
        #expect(widgetsToken.disabled == "token_invalid")
        #expect(widgetsToken.reason?.contains("DeviceTokenNotForTopic") == true, "\(widgetsToken)")
        #expect(try await Self.pushTypeToken(f, "location").disabled == nil)
        let device = try await f.db.query("SELECT disabled_at IS NULL FROM herald.devices")[0].decode(0, as: Bool.self)
        #expect(device, "the device's own token is alive")
        #expect(try await f.db.query("SELECT scope FROM herald.app_problems").isEmpty)

        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Still here')")
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice')")
        try await f.ingest()
        try await f.dispatch()
        let alerts = await f.emulator.apnsReceived.filter { $0.headers["apns-push-type"] == "alert" }
        #expect(alerts.map(\.deviceToken) == [alertToken])
        let reason = try await f.db.query(
            "SELECT reason FROM herald.notifications WHERE push_type = 'voip' ORDER BY id DESC LIMIT 1")[0].decode(
                0, as: String?.self)
        #expect(reason == "no enabled device of user 'alice' has a voip token registered")

        // Registering the dead token again does not make it live; a new one does.
        let again = try await f.db.query(
            "SELECT status FROM herald.register_push_type_token('shop', 'iphone', 'voip', $1)", [voip])[0].decode(
                0, as: String.self)
        #expect(again == "token_invalid")
        let fresh = Self.token("voip", "iphone-2")
        let renewed = try await f.db.query(
            "SELECT status FROM herald.register_push_type_token('shop', 'iphone', 'voip', $1)", [fresh])[0].decode(
                0, as: String.self)
        #expect(renewed == "re-enabled")
    }

    /// BadDeviceToken for every token of a batch is the app's environment, not its tokens: a
    /// configuration problem, and no token is disabled. One an operator finds disabled wrongly,
    /// `herald.enable_device` enables again with its device.
    @Test func aWrongEnvironmentIsTheAppsProblemNotItsPushTypeTokens() async throws {
        let f = try await WorkerFixture.make(apns: true)
        for device in ["iphone", "ipad"] {
            try await f.registerIPhone(device)
            let voip = try await Self.registerToken(f, "voip", device: device)
            await f.emulator.setBehaviour(.invalidToken, forToken: voip)
        }
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice')")
        try await f.ingest()
        try await f.dispatch()
        let scopes = try await f.db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(scopes == ["apns"])
        #expect(try await f.db.query("SELECT 1 FROM herald.push_type_tokens WHERE disabled_at IS NOT NULL").isEmpty)

        try await f.db.execute(
            """
            UPDATE herald.push_type_tokens SET disabled_at = now(), disabled_cause = 'token_invalid',
                                               disabled_reason = 'APNs: APNs answered 400 BadDeviceToken'
            """)
        #expect(try await f.db.query("SELECT herald.enable_device('shop', 'iphone')")[0].decode(0, as: Bool.self))
        let disabled = try await f.db.query(
            """
            SELECT d.device_id FROM herald.push_type_tokens t JOIN herald.devices d ON d.id = t.device_id
            WHERE t.disabled_at IS NOT NULL
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(disabled == ["ipad"])
    }

    @Test func aTokenRegisteredAfterThe410IsLeftAlone() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        let voip = try await Self.registerToken(f, "voip")
        await f.emulator.setBehaviour(.unregisteredSince(Date().addingTimeInterval(-3600)), forToken: voip)
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "iphone").state == "token_invalid")
        #expect(try await Self.pushTypeToken(f, "voip").disabled == nil, "registered after APNs' timestamp")
    }

    @Test func aPushTypeTokenDisabledSinceIngestIsCancelledWithTheReason() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        try await Self.registerToken(f, "pushtotalk")
        _ = try await f.db.query("SELECT herald.send_push('shop', 'pushtotalk', device_ids => '{iphone}')")
        try await f.ingest()
        let unregistered = try await f.db.query(
            "SELECT herald.unregister_push_type_token('shop', 'iphone', 'pushtotalk')")[0].decode(0, as: Bool.self)
        #expect(unregistered)
        try await f.dispatch()
        let delivery = try await f.delivery(of: "iphone")
        #expect(delivery.state == "cancelled")
        #expect(
            delivery.error == "the device's pushtotalk token was disabled since ingest: the app unregistered it",
            "\(delivery)")
        #expect(await f.emulator.apnsReceived.isEmpty)
        #expect(
            try await f.db.query("SELECT herald.unregister_push_type_token('shop', 'iphone', 'pushtotalk')")[0]
                .decode(0, as: Bool.self) == false)
    }

    /// PushKit is not carried by FCM: an iPhone whose notifications go through FCM gets its
    /// VoIP pushes straight from APNs, with the app's APNs key.
    @Test func anIPhoneThroughFCMGetsVoIPStraightFromAPNs() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.db.execute("UPDATE herald.apps SET ios_transport = 'fcm'")
        _ = try await f.db.query("SELECT herald.register_device('shop', 'iphone', 'ios', 'fcm-token-iphone', 'alice')")
        try await Self.registerToken(f, "voip")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.received.map(\.target) == ["fcm-token-iphone"], "the alert, through FCM")
        #expect(await f.emulator.apnsReceived.map(\.deviceToken) == [Self.token("voip", "iphone")])
    }

    /// Over a push certificate, location and widget pushes are refused before sending (APNs takes
    /// them over token-based connections only), and a VoIP push to a topic the certificate does
    /// not list fails alone: the app's alerts go on, and no configuration problem holds them.
    @Test func aCertificateAppFailsWhatItsCertificateCannotSendAndOnlyThat() async throws {
        let certificate = try await WorkerFixture.pushCertificate(days: 365)
        defer { withExtendedLifetime(certificate) {} }
        let f = try await WorkerFixture.make(apnsCertificate: certificate)
        let alertToken = try await f.registerIPhone("iphone")
        for type in ["voip", "location", "widgets"] { try await Self.registerToken(f, type) }
        for type in ["voip", "location", "widgets"] {
            _ = try await f.db.query("SELECT herald.send_push('shop', $1, user_ref => 'alice')", [type])
        }
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let failures = try await f.db.query(
            """
            SELECT n.push_type, d.state, d.last_error FROM herald.deliveries d
            JOIN herald.notifications n ON n.id = d.notification_id WHERE n.push_type IS NOT NULL ORDER BY 1
            """
        ).map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self), try $0.decode(2, as: String?.self))
        }
        #expect(failures.map(\.1) == ["failed", "failed", "failed"], "\(failures)")
        #expect(failures[0].2?.hasPrefix("location pushes need token-based authentication") == true, "\(failures)")
        #expect(
            failures[1].2 == "APNs answered 400 TopicDisallowed: the app's APNs key or certificate does not cover"
                + " com.example.shop.voip", "\(failures)")
        #expect(failures[2].2?.hasPrefix("widget pushes need token-based authentication") == true, "\(failures)")
        #expect(await f.emulator.apnsReceived.map(\.deviceToken) == [alertToken])
        #expect(try await f.db.query("SELECT scope FROM herald.app_problems").isEmpty)
        #expect(try await f.db.query("SELECT 1 FROM herald.push_type_tokens WHERE disabled_at IS NOT NULL").isEmpty)
    }

    @Test func aVoIPPushThatCannotGoInTimeExpiresInsteadOfRinging() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        let voip = try await Self.registerToken(f, "voip")
        await f.emulator.setBehaviour(.unavailable(retryAfter: nil), forToken: voip)
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice', ttl => '1 second')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "iphone").state == "queued")
        let requests = await f.emulator.apnsRequests
        // Its second passes: the claim compares expires_at with the database's now(), so the
        // row's expiry moves into the past rather than the test waiting for it.
        let ttl = try await f.db.query(
            "SELECT extract(epoch FROM expires_at - created_at)::float8 FROM herald.notifications")
        #expect(try ttl[0].decode(0, as: Double.self) == 1)
        try await f.db.execute("UPDATE herald.notifications SET expires_at = now() - interval '1 millisecond'")
        try await f.db.execute("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.dispatch()
        let delivery = try await f.delivery(of: "iphone")
        #expect(delivery.state == "expired", "\(delivery)")
        #expect(await f.emulator.apnsRequests == requests, "not sent again once past its expiry")

        // A scheduled call's ttl counts from its send_at, as a notification's does.
        _ = try await f.db.query(
            "SELECT herald.send_push('shop', 'voip', user_ref => 'alice', send_at => now() + interval '10 minutes')")
        try await f.ingest()
        let scheduled = try await f.db.query(
            """
            SELECT state, extract(epoch FROM expires_at - send_at)::int FROM herald.notifications
            WHERE send_at IS NOT NULL
            """)[0]
        #expect(try scheduled.decode(0, as: String.self) == "accepted")
        #expect(try scheduled.decode(1, as: Int.self) == 30)
    }

    // MARK: The producer's side

    @Test(arguments: [
        (
            "SELECT herald.send_push('shop', 'fax', user_ref => 'alice')",
            "push_type must be one of herald.push_types ('location': location queries"
        ),
        (
            "SELECT herald.send_push('shop', 'voip', user_ref => 'alice', priority => 'normal')",
            "voip pushes go at once (priority high): leave priority out"
        ),
        (
            "SELECT herald.send_push('shop', 'voip', user_ref => 'alice', device_ids => '{a}')",
            "exactly one target"
        ),
        (
            "SELECT herald.register_push_type_token('shop', 'iphone', 'fax', repeat('ab', 32))",
            "push_type must be one of herald.push_types"
        ),
        (
            "SELECT herald.register_push_type_token('shop', 'iphone', 'voip', 'not-hex')",
            "a PushKit VoIP token (PKPushCredentials.token) is 64 or more hexadecimal digits (the token as hex), not 7 characters like 'not-hex…'"
        ),
        (
            "SELECT herald.register_push_type_token('shop', 'nokia', 'voip', repeat('ab', 32))",
            "voip pushes are for ios, and device 'nokia' is android"
        ),
        (
            "SELECT herald.register_push_type_token('shop', 'ghost', 'voip', repeat('ab', 32))",
            "unknown device 'ghost' of app 'shop': register it with herald.register_device first"
        ),
        (
            "SELECT herald.register_device('shop', 'iphone-2', 'ios', repeat('ab', 32), 'alice', 'apns_voip_token')",
            "apns_voip_token is a token for 'voip' pushes, not the device's own"
        ),
        (
            "SELECT herald.register_push_type_token('shop', 'iphone', 'voip', upper('\(WorkerFixture.apnsToken("iphone"))'))",
            "that is device 'iphone''s own notification token; a voip token is a PushKit VoIP token"
        ),
    ])
    func callsSayWhatIsWrong(call: String, expected: String) async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        try await f.register("nokia", "android")
        let error = await #expect(throws: PostgresError.self) { _ = try await f.db.query(call) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(error?.sqlState == "23514" || error?.sqlState == "23503", "\(error?.sqlState ?? "")")
    }

    /// What ingest refuses is kept, rejected with what to fix.
    @Test(arguments: [
        (
            "'widgets', user_ref => 'alice', data => '{\"a\": \"1\"}'",
            "widgets pushes carry no data: WidgetKit push updates (the widgets reload their timelines; iOS 26) only learns that something changed"
        ),
        (
            "'voip', user_ref => 'alice', ttl => '5 minutes'",
            "a voip push may be tried for 00:02:00 at most (ttl or expires_at): a late one must not ring or play"
        ),
        ("'voip', user_ref => 'alice', data => '{\"aps\": \"x\"}'", "data key 'aps' is APNs' own; rename it"),
        (
            "'location', user_ref => 'alice', data => '{\"a\": {\"b\": 1}}'",
            "data value for key 'a' is a JSON object; data values must be strings"
        ),
        (
            "'location', user_ref => 'alice', data => jsonb_build_object('big', repeat('x', 4000))",
            "over APNs' 4096-byte limit for location pushes; shorten the data"
        ),
        ("'voip', device_ids => '{}'", "device_ids is empty: name at least one device"),
    ])
    func ingestRejectsPushesThatBreakTheirTypesRules(arguments: String, reason: String) async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        for type in Self.types { try await Self.registerToken(f, type) }
        _ = try await f.db.query("SELECT herald.send_push('shop', \(arguments))")
        try await f.ingest()
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications")[0]
        #expect(try row.decode(0, as: String.self) == "rejected")
        let written = try row.decode(1, as: String?.self)
        #expect(written?.contains(reason) == true, "\(written ?? "")")
        #expect(try await f.db.query("SELECT 1 FROM herald.deliveries").isEmpty)
    }

    @Test func anAppWithoutAnAPNsSetupIsToldItNeedsOne() async throws {
        let f = try await WorkerFixture.make()
        _ = try await f.db.query("SELECT herald.register_device('shop', 'iphone', 'ios', 'fcm-token', 'alice')")
        try await Self.registerToken(f, "voip")
        _ = try await f.db.query("SELECT herald.send_push('shop', 'voip', user_ref => 'alice')")
        try await f.ingest()
        let reason = try await f.db.query("SELECT reason FROM herald.notifications")[0].decode(0, as: String?.self)
        #expect(
            reason == "app 'shop' has no APNs setup: voip pushes go straight to APNs with the app's bundle id and"
                + " APNs key or certificate (herald.app_apns)")
    }

    /// A token is one device's: registered by another device of the app, it moves there. The
    /// same token again is `unchanged`; a device's new token replaces its old one.
    @Test func aPushTypeTokenMovesToTheDeviceThatRegistersItAndIsReplacedByANewOne() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        try await f.registerIPhone("ipad", user: "bob")
        let token = try await Self.registerToken(f, "location")
        func register(_ device: String, _ token: String) async throws -> String {
            try await f.db.query(
                "SELECT status FROM herald.register_push_type_token('shop', $1, 'location', $2)", [device, token]
            )[0].decode(0, as: String.self)
        }
        #expect(try await register("iphone", token) == "unchanged")
        #expect(try await register("ipad", token) == "registered")
        let rows = try await f.db.query(
            """
            SELECT d.device_id, t.disabled_cause, t.disabled_reason FROM herald.push_type_tokens t
            JOIN herald.devices d ON d.id = t.device_id ORDER BY 1
            """
        ).map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String?.self), try $0.decode(2, as: String?.self))
        }
        #expect(rows.map(\.0) == ["ipad", "iphone"])
        #expect(rows[0].1 == nil)
        #expect(rows[1].1 == "token_moved" && rows[1].2 == "its token was registered again by device ipad")
        #expect(try await register("ipad", Self.token("location", "ipad-new")) == "registered")
        #expect(
            try await f.db.query("SELECT count(*) FROM herald.push_type_tokens WHERE disabled_at IS NULL")[0].decode(
                0, as: Int.self) == 1)
    }
}
