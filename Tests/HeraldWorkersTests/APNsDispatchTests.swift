import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Testing

/// iOS straight to APNs: the dispatch worker against a real database and the emulator's APNs
/// behind nginx (TLS, HTTP/2), which checks the provider token or client certificate.
@Suite struct APNsDispatchTests {
    @Test func anAlertGoesStraightToAPNsWithApplesHeaders() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let token = try await f.registerIPhone("iphone")
        let id = try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42', data => '{"order": "42"}',
                               badge => 3, sound => 'ding', deep_link => 'shop://o/42', priority => 'normal', ttl => '2 hours')
            """)[0].decode(0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()

        let received = await f.emulator.apnsReceived
        let delivery = try await f.delivery(of: "iphone")
        try #require(received.count == 1, "\(delivery)")
        let push = received[0]
        #expect(push.deviceToken == token)
        #expect(push.authentication == "token")
        #expect(push.headers["apns-topic"] == WorkerFixture.bundleID)
        #expect(push.headers["apns-push-type"] == "alert")
        #expect(push.headers["apns-priority"] == "5")
        #expect(push.headers["apns-collapse-id"] == String(id), "a repeat replaces: the notification id by default")
        let expiration = try #require(Int(push.headers["apns-expiration"] ?? ""))
        #expect(abs(expiration - Int(Date().timeIntervalSince1970) - 7200) < 60)
        #expect((push.aps["alert"] as? [String: String]) == ["title": "Shipped", "body": "Parcel 42"])
        #expect(push.aps["mutable-content"] as? Int == 1)
        #expect(push.aps["badge"] as? Int == 3)
        #expect(push.document["order"] as? String == "42")
        #expect(push.document["herald_notification_id"] as? String == String(id))
        #expect((push.document["herald_report"] as? String)?.isEmpty == false)

        let row = try await f.db.query(
            "SELECT state, provider_message_id, provider_unique_id FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "sent")
        #expect(try row.decode(1, as: String.self) == push.apnsID, "the apns-id Herald chose")
        #expect(try row.decode(2, as: String?.self) == push.uniqueID)
        #expect(UUID(uuidString: push.apnsID) != nil)
        #expect(await f.emulator.received.isEmpty, "nothing went through FCM")
    }

    @Test func silentPushesAndWakeUpsAreBackgroundPushesThatDoNotLinger() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', silent => true, data => '{\"sync\": \"1\"}')")
        try await f.ingest()
        try await f.dispatch()
        let push = try #require(await f.emulator.apnsReceived.first)
        #expect(push.headers["apns-push-type"] == "background")
        #expect(push.headers["apns-priority"] == "5")
        #expect(push.aps.keys.sorted() == ["content-available"])
        #expect(push.document["sync"] as? String == "1")

        // A wake-up (Herald's own, after a report shows missed alerts) expires within two
        // minutes, so it never sits in APNs' one slot in place of an alert.
        try await f.db.execute(
            """
            INSERT INTO herald.notifications (app_id, device_ids, silent, priority, expires_at, origin, state, ingested_at)
            VALUES ('shop', '{iphone}', true, 'normal', now() + interval '30 minutes', 'wakeup', 'accepted', now());
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at)
            SELECT max(n.id), (SELECT id FROM herald.devices), 'ios_wakeup', now() FROM herald.notifications n;
            """)
        try await f.dispatch()
        let wakeup = try #require(await f.emulator.apnsReceived.last)
        #expect(wakeup.headers["apns-push-type"] == "background")
        let expiration = try #require(Int(wakeup.headers["apns-expiration"] ?? ""))
        #expect(expiration <= Int(Date().timeIntervalSince1970) + 121)
    }

    @Test(arguments: [
        (EmulatorBehaviour.invalidToken, "token_invalid", true), (.senderIDMismatch, "token_invalid", true),
        (.unregistered, "token_invalid", true), (.gone, "token_invalid", true),
        (.payloadTooLarge, "failed", false), (.quotaExceeded(retryAfter: nil), "queued", false),
        (.unavailable(retryAfter: nil), "queued", false), (.internalError, "queued", false),
        (.thirdPartyAuthError, "queued", false),
    ])
    func applesAnswers(behaviour: EmulatorBehaviour, state: String, disabled: Bool) async throws {
        let f = try await WorkerFixture.make(apns: true)
        let token = try await f.registerIPhone("iphone")
        await f.emulator.setBehaviour(behaviour, forToken: token)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "iphone")
        #expect(delivery.state == state, "\(delivery)")
        let device = try await f.db.query("SELECT disabled_cause, disabled_reason FROM herald.devices")[0]
        #expect(try (device.decode(0, as: String?.self) == "token_invalid") == disabled, "\(delivery)")
        if disabled {
            #expect(try device.decode(1, as: String?.self)?.hasPrefix("APNs: APNs answered 4") == true)
        }
        let scopes = try await f.db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(scopes == (behaviour == .thirdPartyAuthError ? ["apns"] : []))
    }

    @Test func aDeviceThatRegisteredAgainSinceAPNsSaidUnregisteredIsLeftAlone() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let token = try await f.registerIPhone("iphone")
        // APNs knew the token invalid an hour ago; the device registered it since (reinstalled).
        await f.emulator.setBehaviour(.unregisteredSince(Date().addingTimeInterval(-3600)), forToken: token)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "iphone").state == "token_invalid")
        #expect(
            try await f.db.query("SELECT disabled_at IS NULL FROM herald.devices")[0].decode(0, as: Bool.self),
            "registered after APNs' timestamp: still live")

        // A timestamp after the registration disables it.
        await f.emulator.setBehaviour(.unregisteredSince(Date().addingTimeInterval(3600)), forToken: token)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Again')")
        try await f.ingest()
        try await f.dispatch()
        #expect(
            try await f.db.query("SELECT disabled_cause FROM herald.devices")[0].decode(0, as: String?.self)
                == "token_invalid")
    }

    @Test func oneProviderTokenServesEveryRequestAndAnExpiredOneIsRetriedOnce() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let first = try await f.registerIPhone("first")
        try await f.registerIPhone("second")
        try await f.registerIPhone("third", user: "bob")
        await f.emulator.setBehaviour(.expiredProviderToken, forToken: first, times: 1)
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'One')")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'Two')")
        try await f.ingest()
        try await f.dispatch()
        for device in ["first", "second", "third"] {
            #expect(try await f.delivery(of: device).state == "sent", "\(device)")
        }
        #expect(await f.emulator.apnsProviderTokens.count == 1, "one token for every request")
        #expect(await f.emulator.apnsRequests == 4, "three sends and one retry after ExpiredProviderToken")
    }

    @Test func aBrokenAPNsKeyNeverSlowsAndroid() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.register("pixel", "android")
        let token = try await f.registerIPhone("iphone")
        await f.emulator.setBehaviour(.thirdPartyAuthError, forToken: token)
        for title in ["One", "Two"] {
            _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => $1)", [title])
            try await f.ingest()
            try await f.dispatch()
        }
        #expect(await f.messages(to: "token-pixel").count == 2, "Android sent both at once")
        #expect(await f.emulator.apnsRequests == 1, "the iPhone waits for the probe, unsent")
        let waiting = try await f.delivery(of: "iphone")
        #expect(waiting.error?.contains("iOS straight to APNs is failing") == true, "\(waiting)")
        let problems = try await f.db.query("SELECT scope, waiting FROM herald.app_problems")
        #expect(try problems.map { try $0.decode(0, as: String.self) } == ["apns"])
        #expect(try problems[0].decode(1, as: String.self) == "iOS deliveries straight to APNs")
    }

    @Test func switchingTransportKeepsReachingDevicesThatHaveNotRegisteredAgain() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("old-iphone", "ios")  // an FCM registration token, app on FCM
        // The app moves its iOS devices to APNs; a new install registers its APNs device token.
        let key = try SecretFile(
            contents: try await f.emulator.makeAPNsKey(
                teamID: "TEAM123456", keyID: "KEY1234567", topics: [WorkerFixture.bundleID]))
        try await f.db.query(
            """
            INSERT INTO herald.app_apns (app_id, bundle_id, team_id, key_id, key_file)
            VALUES ('shop', $1, 'TEAM123456', 'KEY1234567', $2)
            """, [WorkerFixture.bundleID, key.path])
        try await f.db.query("UPDATE herald.apps SET ios_transport = 'apns'")
        // Without the TLS front, the stand-in's APNs is not reachable; the old device does not need it.
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "old-iphone").state == "sent")
        #expect(await f.message(to: "token-old-iphone") != nil, "through FCM, as its token is FCM's")
        let kinds = try await f.db.query("SELECT token_kind FROM herald.devices").map {
            try $0.decode(0, as: String.self)
        }
        #expect(kinds == ["registration_token"])
        // A new registration is an APNs device token now, and must look like one.
        let refused = await #expect(throws: PostgresError.self) {
            _ = try await f.db.query(
                "SELECT herald.register_device('shop', 'new-iphone', 'ios', 'fcm-token-x', 'alice')")
        }
        #expect(refused?.message.contains("an APNs device token is 64 or more hexadecimal digits") == true)
        _ = try await f.db.query(
            "SELECT herald.register_device('shop', 'new-iphone', 'ios', $1, 'alice')", [WorkerFixture.apnsToken("new")])
        #expect(
            try await f.db.query("SELECT token_kind FROM herald.devices WHERE device_id = 'new-iphone'")[0].decode(
                0, as: String.self) == "apns_device_token")
    }

    @Test func aPushCertificateAuthenticatesAndItsExpiryIsWatched() async throws {
        let certificate = try await WorkerFixture.pushCertificate(days: 20)
        let f = try await WorkerFixture.make(apnsCertificate: certificate)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await f.delivery(of: "iphone")
        #expect(delivery.state == "sent", "\(delivery)")
        #expect(await f.emulator.apnsReceived.first?.authentication == "certificate")

        // The expiry read at load is in herald.app_apns, and 20 days ahead is inside the 30-day warning.
        let expires = try await f.db.query("SELECT certificate_expires_at FROM herald.app_apns")[0].decode(
            0, as: Date?.self)
        #expect(abs((expires ?? .distantPast).timeIntervalSinceNow - 20 * 86_400) < 300)
        let warning = try await f.db.query("SELECT scope, config_error FROM herald.app_problems")
        #expect(try warning.map { try $0.decode(0, as: String.self) } == ["apns_certificate"])
        #expect(try warning[0].decode(1, as: String.self).contains("in 20 days: renew it"))
    }

    @Test func anInstallationIDIsSentAsFCMsFidTarget() async throws {
        let f = try await WorkerFixture.make()
        _ = try await f.db.query(
            "SELECT herald.register_device('shop', 'pixel', 'android', 'fid-pixel-1', 'alice', token_kind => 'installation_id')"
        )
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let message = try #require(await f.emulator.received.first?.message)
        #expect(message["fid"] as? String == "fid-pixel-1")
        #expect(message["token"] == nil)
    }
}
