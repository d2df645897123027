import Foundation
import HeraldCrypto
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// HarmonyOS NEXT phones, through HarmonyOS Push Kit's stand-in, which checks each request as
/// Huawei documents it (``HarmonyService``): the service account's own PS256 token against the
/// project's public key, the scenario, the payload's members and the result codes.
@Suite struct HarmonyDispatchTests {
    static let projectID = "101653523863785276"
    static let keyID = "b2c4e6f8a0"
    static let subAccount = "1016535238637"
    /// The project's key, and another that Push Kit does not know. Made once each: making an
    /// RSA key is a search for primes.
    static let key = Result { try CryptoKey.generateRSA() }
    static let otherKey = Result { try CryptoKey.generateRSA() }

    /// The fixture's app `shop` with a service-account key file (signed by `key`, the project's
    /// unless said), its notifications' `category`; the file is kept for the test's lifetime.
    func harmonyApp(_ f: WorkerFixture, key: CryptoKey? = nil, category: String? = nil) async throws -> SecretFile {
        let projectKey = try Self.key.get()
        try await f.emulator.registerHarmonyProject(
            Self.projectID, keyID: Self.keyID, subAccount: Self.subAccount,
            publicKeyPEM: try projectKey.publicKeyPEM())
        let file = try Self.keyFile(key ?? projectKey)
        try await f.db.query(
            "INSERT INTO herald.app_harmony (app_id, service_account_file, category) VALUES ('shop', $1, coalesce($2, 'MARKETING'))",
            [file.path, category])
        return file
    }

    /// A key file as the HUAWEI Developers API Console gives it.
    static func keyFile(_ key: CryptoKey) throws -> SecretFile {
        let object: [String: String] = [
            "project_id": projectID, "key_id": keyID, "private_key": try key.privateKeyPEM(), "sub_account": subAccount,
            "auth_uri": "https://oauth-login.cloud.huawei.com/oauth2/v3/authorize",
            "token_uri": "https://oauth-login.cloud.huawei.com/oauth2/v3/token",
        ]
        return try SecretFile(
            contents: String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self),
            suffix: ".json")
    }

    func registerPhone(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let token = "MAMzLg" + String(repeating: "k", count: 40) + device.replacingOccurrences(of: "-", with: "_")
        try await f.db.query("SELECT herald.register_device('shop', $1, 'harmony', $2, $3)", [device, token, user])
        return token
    }

    @Test func aHarmonyPhoneGetsANotificationPushKitShowsAndItsAppReports() async throws {
        let f = try await WorkerFixture.make()
        let file = try await harmonyApp(f, category: "EXPRESS")
        let token = try await registerPhone(f, "mate-70")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', badge => 150, ttl => interval '2 hours',
                               deep_link => 'https://shop.example/orders/42',
                               image_url => 'https://shop.example/parcel.png', message_class => 'service')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "mate-70")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's Android phones go through FCM")
        let received = try #require(await f.emulator.harmonyReceived.first)
        #expect(received.projectID == Self.projectID && received.token == token && received.pushType == 0)
        #expect(sent.name == received.requestID, "the request id is kept as the provider's message id")
        #expect((7000...7200).contains(received.ttl ?? 0), "\(String(describing: received.ttl))")
        let shown = try #require(received.payload["notification"] as? [String: Any])
        #expect(shown["category"] as? String == "EXPRESS", "a service message's category, from herald.app_harmony")
        #expect(shown["title"] as? String == "Shipped" && shown["body"] as? String == "Parcel 42")
        #expect((shown["badge"] as? [String: Any])?["setNum"] as? Int == 99, "Push Kit's largest badge")
        #expect(shown["notifyId"] as? Int != nil, "a repeated send replaces the notification")
        // Push Kit refused the image it had not reviewed (80100022): it went again without it.
        #expect(shown["image"] == nil)
        let click = try #require(shown["clickAction"] as? [String: Any])
        #expect(click["actionType"] as? Int == 1 && click["uri"] as? String == "https://shop.example/orders/42")
        // The app reads the data from the Want that opens it, and reports with Herald's reference.
        let data = received.data
        #expect(data["order"] == "42" && data["herald_notification_id"] != nil)
        let reference = try #require(data["herald_report"])
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
        // What it missed can be fetched like any phone's.
        let pending = try await f.db.query(
            "SELECT notification_id FROM herald.pending_notifications($1, NULL, 10)", [reference])
        #expect(pending.count == 1)
        _ = file
    }

    /// A silent notification is a background message, handed to the app; a dry run is built and
    /// not sent (Push Kit's v3 API has no validate-only request).
    @Test func aSilentNotificationIsABackgroundMessageAndADryRunIsNotSent() async throws {
        let f = try await WorkerFixture.make()
        let file = try await harmonyApp(f)
        _ = try await registerPhone(f, "mate-70")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', data => '{\"sync\": \"inbox\"}', silent => true)")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        let states = try await f.db.query("SELECT state, payload_kind FROM herald.deliveries ORDER BY id").map {
            [try $0.decode(0, as: String.self), try $0.decode(1, as: String.self)]
        }
        #expect(states == [["sent", "harmony_background"], ["validated", "harmony_alert"]])
        let received = await f.emulator.harmonyReceived
        #expect(received.count == 1)
        #expect(received.first?.pushType == 6)
        #expect(received.first?.data["sync"] == "inbox" && received.first?.data["herald_report"] != nil)
        _ = file
    }

    /// A token Push Kit calls malformed disables that phone only. One refused as not this
    /// project's (`noRight`) disables no phone while no send with the account has been accepted
    /// (the key file may be another project's); once one has, it is the phone's.
    @Test func aRefusedTokenDisablesItsPhoneAloneOnceTheAccountIsProven() async throws {
        let f = try await WorkerFixture.make()
        let file = try await harmonyApp(f)
        let malformed = try await registerPhone(f, "old-mate")
        let stale = try await registerPhone(f, "upgraded-p50")
        await f.emulator.setBehaviour(.invalidToken, forToken: malformed)
        await f.emulator.setBehaviour(.unregistered, forToken: stale)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let refused = try await f.delivery(of: "old-mate")
        #expect(refused.state == "token_invalid" && refused.error?.contains("tokenFormatError") == true, "\(refused)")
        let waiting = try await f.delivery(of: "upgraded-p50")
        #expect(waiting.state == "queued", "\(waiting)")
        let problem = try await f.db.query("SELECT scope, config_error FROM herald.app_problems")
        #expect(try problem.map { try $0.decode(0, as: String.self) } == ["harmony"])
        #expect(try problem[0].decode(1, as: String.self).contains("service_account_file"))

        // A phone of Bob's is accepted: the account is proven, and the stale token is the phone's.
        _ = try await registerPhone(f, "mate-70", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.probeAgain(only: "mate-70")
        #expect(try await f.delivery(of: "mate-70").state == "sent")
        // Each further try (a probe a minute while the problem lasts) finds the stale token dead.
        for _ in 0..<4 {
            if try await f.delivery(of: "upgraded-p50").state == "token_invalid" { break }
            try await f.probeAgain()
        }
        #expect(try await f.delivery(of: "upgraded-p50").state == "token_invalid")
        let disabled = try await f.db.query(
            "SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL ORDER BY device_id"
        ).map { try $0.decode(0, as: String.self) }
        #expect(disabled == ["old-mate", "upgraded-p50"])
        _ = file
    }

    /// A notification's `notifyId` takes every value Push Kit allows (0 to 2³¹−1), so that two
    /// notifications share one only when their ids are 2³¹ apart.
    @Test func aNotifyIDIsTheNotificationsIdModuloTwoToTheThirtyFirst() {
        #expect(PayloadBuilder.notifyID(0) == 0)
        #expect(PayloadBuilder.notifyID(2_147_483_647) == 2_147_483_647, "Push Kit's largest, once missed")
        #expect(PayloadBuilder.notifyID(2_147_483_648) == 0)
        #expect(PayloadBuilder.notifyID(2_147_483_648 + 41) == PayloadBuilder.notifyID(41))
        #expect(PayloadBuilder.notifyID(Int64.max) == 2_147_483_647)
        let ids = (0..<1000).map { Int64(2_147_483_000) + Int64($0) }
        #expect(Set(ids.map(PayloadBuilder.notifyID)).count == 1000, "ids fewer than 2³¹ apart never share one")
    }

    /// That a service account was accepted is known to every daemon: one started since takes a
    /// token refused as not this project's (`noRight`) for the phone's, not the account's.
    @Test func anAccountAcceptedBeforeARestartIsStillKnownAfterIt() async throws {
        let f = try await WorkerFixture.make()
        let file = try await harmonyApp(f)
        _ = try await registerPhone(f, "mate-70", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate-70").state == "sent")
        #expect(
            try await f.db.query("SELECT account FROM herald.accepted_credentials WHERE provider = 'harmony'").map {
                try $0.decode(0, as: String.self)
            } == ["project \(Self.projectID) key \(Self.keyID)"])

        let restarted = await f.restartedContext()
        let stale = try await registerPhone(f, "upgraded-p50")
        await f.emulator.setBehaviour(.unregistered, forToken: stale)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'y')")
        try await f.ingest()
        try await DispatchWorker(context: restarted).drain()
        let refused = try await f.delivery(of: "upgraded-p50")
        #expect(refused.state == "token_invalid", "\(refused)")
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty)
        _ = file
    }

    /// A key Push Kit does not know is the app's configuration, scoped to HarmonyOS: its
    /// HarmonyOS phones wait (no attempt lost), its other phones are sent, and no phone is
    /// disabled; fixed, the next probe sends them.
    @Test func aKeyPushKitRefusesHoldsBackOnlyTheAppsHarmonyPhones() async throws {
        let f = try await WorkerFixture.make()
        let wrong = try await harmonyApp(f, key: try Self.otherKey.get())
        _ = try await registerPhone(f, "mate-70")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        try await f.expectHeldBackForItsSetup("mate-70", saying: "80200001", scope: "harmony")

        let fixed = try Self.keyFile(try Self.key.get())
        try await f.db.query("UPDATE herald.app_harmony SET service_account_file = $1", [fixed.path])
        try await f.probeAgain()
        #expect(try await f.delivery(of: "mate-70").state == "sent")
        _ = wrong
    }

    /// A token Push Kit calls expired (80200005) is signed again and the message sent once more
    /// (twice, and it is the app's configuration: the machine's clock?); traffic control (503)
    /// waits without spending an attempt.
    @Test func anExpiredTokenIsSignedAgainAndTrafficControlWaits() async throws {
        let f = try await WorkerFixture.make()
        let file = try await harmonyApp(f)
        let token = try await registerPhone(f, "mate-70")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', body => 'first')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.harmonyTokensSeen == 1)
        await f.emulator.expireHarmonyTokens()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'second')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate-70").state == "sent")
        #expect(await f.emulator.harmonyTokensSeen == 2, "signed again")
        let shown = await f.emulator.harmonyReceived.map {
            let notification = $0.payload["notification"] as? [String: Any]
            return [notification?["title"] as? String, notification?["body"] as? String]
        }
        #expect(shown == [["first", "first"], ["second", "second"]], "one of title and body gives the other")

        await f.emulator.setBehaviour(.expiredProviderToken, forToken: token, times: 2)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'third')")
        try await f.ingest()
        try await f.dispatch()
        let refused = try await f.delivery(of: "mate-70")
        #expect(refused.state == "queued" && refused.error?.contains("clock") == true, "\(refused)")
        try await f.db.execute("DELETE FROM herald.app_config_problems")

        await f.emulator.setBehaviour(.unavailable(retryAfter: 2), forToken: token, times: 1)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'second')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query(
            "SELECT state, attempts, last_error FROM herald.deliveries ORDER BY id DESC LIMIT 1")[0]
        #expect(try row.decode(0, as: String.self) == "queued")
        #expect(try row.decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try row.decode(2, as: String.self).contains("traffic control"))
        #expect(await f.emulator.harmonyReceived.count == 2)
        _ = file
    }

    /// A HarmonyOS phone registers with its platform's own token kind; the platforms are data,
    /// and a wrong one is refused with the list.
    @Test func registeringAHarmonyPhone() async throws {
        let f = try await WorkerFixture.make()
        _ = try await registerPhone(f, "mate-70")
        let kind = try await f.db.query("SELECT token_kind, platform FROM herald.devices")[0]
        #expect(try kind.decode(0, as: String.self) == "harmony_token")
        #expect(try kind.decode(1, as: String.self) == "harmony")
        await #expect {
            try await f.db.query("SELECT herald.register_device('shop', 'x', 'ohos', 'MAMzLg0123456789abcdef')")
        } throws: {
            "\($0)".contains("'harmony': a HarmonyOS NEXT phone") && "\($0)".contains("not 'ohos'")
        }
        await #expect {
            try await f.db.query(
                "SELECT herald.register_device('shop', 'x', 'android', 'MAMzLg0123456789abcdef', NULL, 'harmony_token')"
            )
        } throws: {
            "\($0)".contains("cannot belong to a device of platform android")
        }
    }
}
