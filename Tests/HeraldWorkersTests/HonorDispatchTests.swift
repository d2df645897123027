import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Honor phones through Honor Push's stand-in, which checks each request as Honor's send guide
/// and field reference describe it (``HonorService``): the OAuth 2.0 client, the `timestamp`
/// header, the message's members, its tap action and importance.
@Suite struct HonorDispatchTests {
    static let appID = "104405925"
    static let clientID = "2hq1rfoz9vbg7acxmd3ukzyl"

    /// The fixture's app `shop` with an Honor Push setup the stand-in trusts (or, with `secret`,
    /// another), and its secret's file, kept for the test's lifetime.
    func honorApp(_ f: WorkerFixture, secret: String = "the-client-secret") async throws -> SecretFile {
        await f.emulator.registerHonorApp(appID: Self.appID, clientID: Self.clientID, secret: "the-client-secret")
        let file = try SecretFile(contents: secret + "\n", suffix: ".secret")
        try await f.db.query(
            "INSERT INTO herald.app_honor (app_id, honor_app_id, client_id, client_secret_file) VALUES ('shop', $1, $2, $3)",
            [Self.appID, Self.clientID, file.path])
        return file
    }

    func registerHonor(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let token =
            "BAEAAAAAB.jTHzeaAm" + String(repeating: "h", count: 30) + device.replacingOccurrences(of: "-", with: "_")
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'honor_token')", [device, token, user])
        return token
    }

    @Test func anHonorPhoneIsShownANotificationOfItsImportanceAndItsAppReadsTheData() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f)
        let token = try await registerHonor(f, "magic")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', ttl => interval '2 hours', message_class => 'service',
                               deep_link => 'https://shop.example/orders/42')
            """)
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', body => 'Sale today', deep_link => 'shop://sale')")
        try await f.ingest()
        try await f.dispatch()

        #expect(try await f.db.query("SELECT 1 FROM herald.deliveries WHERE state <> 'sent'").isEmpty)
        let received = await f.emulator.honorReceived.sorted {
            ($0.data["herald_notification_id"] ?? "") < ($1.data["herald_notification_id"] ?? "")
        }
        #expect(received.count == 2 && received.allSatisfy { $0.token == token && $0.appID == Self.appID })
        let service = try #require(received.first?.notification)
        #expect(service["title"] as? String == "Shipped" && service["body"] as? String == "Parcel 42")
        #expect(service["importance"] as? String == "NORMAL", "a service message")
        let click = try #require(service["clickAction"] as? [String: Any])
        #expect(click["type"] as? Int == 2 && click["url"] as? String == "https://shop.example/orders/42")
        #expect(service["notifyId"] as? Int != nil)
        let android = try #require(received.first?.body["android"] as? [String: Any])
        let ttl = try #require(android["ttl"] as? String)
        #expect((7000...7200).contains(Int(ttl.dropLast()) ?? 0), "\(ttl)")
        #expect(received.first?.data["order"] == "42" && received.first?.data["herald_report"] != nil)
        let marketing = try #require(received.last?.notification)
        #expect(marketing["importance"] as? String == "LOW", "marketing unless the producer says service")
        #expect(marketing["title"] as? String == "Sale today", "a title not given takes the body's text")
        #expect((marketing["clickAction"] as? [String: Any])?["intent"] as? String == "shop://sale")
        #expect(try await f.delivery(of: "magic").name == received.last?.requestID)
        _ = secret
    }

    /// A silent notification is a pass-through message; a dry run is built, not sent.
    @Test func aSilentNotificationPassesThroughAndADryRunIsNotSent() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f)
        _ = try await registerHonor(f, "magic")
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', data => '{\"sync\": \"inbox\"}', silent => true)")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        let states = try await f.db.query("SELECT state FROM herald.deliveries ORDER BY id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["sent", "validated"])
        let received = try #require(await f.emulator.honorReceived.first)
        #expect(received.notification == nil && received.data["sync"] == "inbox")
        #expect(await f.emulator.honorReceived.count == 1)
        _ = secret
    }

    /// A token Honor lists as expired disables that phone alone; one it calls invalid (80300007)
    /// does so only once a send with the app's client has been accepted.
    @Test func anExpiredTokenDisablesItsPhoneAlone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f)
        let expired = try await registerHonor(f, "old-magic")
        let invalid = try await registerHonor(f, "older-magic")
        _ = try await registerHonor(f, "magic", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: expired)
        await f.emulator.setBehaviour(.invalidToken, forToken: invalid)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "magic").state == "sent")
        #expect(try await f.delivery(of: "old-magic").state == "token_invalid")
        #expect(try await f.delivery(of: "older-magic").state == "token_invalid")
        let disabled = try await f.db.query(
            "SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL ORDER BY device_id")
        #expect(try disabled.map { try $0.decode(0, as: String.self) } == ["old-magic", "older-magic"])
        _ = secret
    }

    /// Before any send with the app's client was accepted, 80300007 may mean the client is
    /// another app's: it is the app's configuration, and no phone is disabled.
    @Test func anInvalidTokenBeforeTheClientIsProvenDisablesNoPhone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f)
        let invalid = try await registerHonor(f, "older-magic")
        await f.emulator.setBehaviour(.invalidToken, forToken: invalid)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        try await f.expectHeldBackForItsSetup("older-magic", saying: "80300007", scope: "honor")
        _ = secret
    }

    /// A client Honor's token endpoint refuses is the app's configuration, scoped to Honor Push:
    /// its Honor phones wait, its other phones are sent, no phone is disabled. An access token
    /// Honor stops taking is fetched again and the message sent.
    @Test func aRefusedClientHoldsBackOnlyTheAppsHonorPhonesAndAnExpiredTokenIsFetchedAgain() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f, secret: "a-wrong-secret")
        _ = try await registerHonor(f, "magic")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        try await f.expectHeldBackForItsSetup("magic", saying: "unauthorized_client", scope: "honor")

        let fixed = try SecretFile(contents: "the-client-secret", suffix: ".secret")
        try await f.db.query("UPDATE herald.app_honor SET client_secret_file = $1", [fixed.path])
        try await f.probeAgain()
        #expect(try await f.delivery(of: "magic").state == "sent")
        await f.emulator.expireHonorAccessTokens()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'again')")
        try await f.ingest()
        try await f.dispatch()
        #expect(await f.emulator.honorReceived.count == 2)
        #expect(await f.emulator.honorTokenRequests == 3, "the refused secret's, the fixed one's, the fresh one")
        _ = secret
    }

    /// Honor's rate (HTTP 429) holds back the app's sends without spending attempts, on every
    /// daemon, until its Retry-After.
    @Test func theRateHoldsBackTheAppOnEveryDaemonWithoutSpendingAnAttempt() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await honorApp(f)
        let token = try await registerHonor(f, "magic")
        _ = try await registerHonor(f, "magic-2", user: "bob")
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: 3), forToken: token, times: 1)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query("SELECT state, attempts, run_at FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "queued" && (try row.decode(1, as: Int.self)) == 0)
        #expect(abs(try row.decode(2, as: Date.self).timeIntervalSince(clock.now()) - 3) < 0.001)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        #expect(try await f.delivery(of: "magic-2").state == "queued")
        #expect(await f.emulator.honorReceived.isEmpty)
        clock.advance(by: .seconds(3))
        try await f.dispatch()
        #expect(try await f.delivery(of: "magic").state == "sent")
        #expect(try await f.delivery(of: "magic-2").state == "sent")
        _ = secret
    }

    /// A message Honor refuses for good fails alone, in Honor's words; the phone stays.
    @Test func aRefusedMessageFailsAlone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await honorApp(f)
        let token = try await registerHonor(f, "magic")
        _ = try await registerHonor(f, "magic-2")
        await f.emulator.setBehaviour(.payloadTooLarge, forToken: token)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let failed = try await f.delivery(of: "magic")
        #expect(failed.state == "failed" && failed.error?.contains("80300008") == true, "\(failed)")
        #expect(try await f.delivery(of: "magic-2").state == "sent")
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        _ = secret
    }
}
