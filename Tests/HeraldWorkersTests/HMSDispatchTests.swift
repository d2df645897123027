import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Android phones without Google's services, through Huawei Push Kit's stand-in, which checks
/// each request as Huawei documents it (``HMSService``): the app's client credentials, the
/// message's members, sizes and codes.
@Suite struct HMSDispatchTests {
    static let clientID = "106892911"

    /// The fixture's app `shop` with Push Kit credentials the stand-in trusts (or, with
    /// `secret`, others), and its secret's file, kept for the test's lifetime.
    func huaweiApp(_ f: WorkerFixture, secret: String = "the-real-secret") async throws -> SecretFile {
        await f.emulator.registerHMSApp(clientID: Self.clientID, secret: "the-real-secret")
        let file = try SecretFile(contents: secret + "\n", suffix: ".secret")
        try await f.db.query(
            "INSERT INTO herald.app_hms (app_id, client_id, client_secret_file) VALUES ('shop', $1, $2)",
            [Self.clientID, file.path])
        return file
    }

    func registerHuawei(_ f: WorkerFixture, _ device: String, user: String = "alice") async throws -> String {
        let token = "ANDmbp0J" + String(repeating: "x", count: 40) + device.replacingOccurrences(of: "-", with: "_")
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'hms_token')", [device, token, user])
        return token
    }

    @Test func aHuaweiPhoneGetsADataMessageItsAppShowsAndReports() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        let token = try await registerHuawei(f, "mate")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', priority => 'normal', ttl => interval '2 hours',
                               android_channel_id => 'orders')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "mate")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's other phones go through FCM")
        let received = try #require(await f.emulator.hmsReceived.first)
        #expect(received.clientID == Self.clientID && received.token == token && !received.validateOnly)
        #expect(sent.name == received.requestID, "the request id is kept as the provider's message id")
        let android = try #require(received.message["android"] as? [String: Any])
        #expect(android["urgency"] as? String == "NORMAL")
        #expect(android["collapse_key"] as? Int == -1, "every message kept while the phone is offline")
        let ttl = try #require(android["ttl"] as? String)
        #expect(ttl.hasSuffix("s") && (7000...7200).contains(Int(ttl.dropLast()) ?? 0), "\(ttl)")
        #expect(received.message["notification"] == nil, "a data message: the app shows it itself")
        let data = received.data
        #expect(data["order"] == "42" && data["title"] == "Shipped" && data["body"] == "Parcel 42")
        #expect(data["channel_id"] == "orders")
        // The app reports it with the reference Herald put in, as any Android app does.
        let reference = try #require(data["herald_report"])
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
        #expect(await f.emulator.hmsTokenRequests == 1)
        _ = secret
    }

    /// A dry run is Push Kit's `validate_only`, checked by Huawei and never shown.
    @Test func aDryRunIsValidatedByPushKit() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        _ = try await registerHuawei(f, "mate")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x', dry_run => true)")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate").state == "validated")
        #expect(await f.emulator.hmsReceived.map(\.validateOnly) == [true])
        _ = secret
    }

    /// A token Push Kit declares invalid disables that phone only; the others are sent.
    @Test func anInvalidTokenDisablesItsPhoneAlone() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        let dead = try await registerHuawei(f, "old-mate")
        _ = try await registerHuawei(f, "mate", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: dead)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let refused = try await f.delivery(of: "old-mate")
        #expect(refused.state == "token_invalid" && refused.error?.contains("80300007") == true, "\(refused)")
        #expect(try await f.delivery(of: "mate").state == "sent")
        let disabled = try await f.db.query(
            "SELECT device_id, disabled_cause FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(disabled.count == 1)
        #expect(try disabled[0].decode(0, as: String.self) == "old-mate")
        _ = secret
    }

    /// Push Kit answers 80300007 also when the app's row names another app's credentials: until
    /// a send with them is accepted, it is their problem, and no phone is disabled; once one is,
    /// a phone refused so is that phone's.
    @Test func noPhoneIsDisabledBeforeTheCredentialsAreProven() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        for device in ["mate", "nova"] {
            await f.emulator.setBehaviour(.unregistered, forToken: try await registerHuawei(f, device))
        }
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate").state == "queued")
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        let problem = try await f.db.query("SELECT scope, config_error FROM herald.app_problems")
        #expect(problem.count == 1)
        #expect(try problem[0].decode(1, as: String.self).contains("herald.app_hms.client_id"))

        // Bob's phone is the next probe, and it is accepted: the credentials are this app's, and
        // Alice's dead phones are disabled at their next try.
        _ = try await registerHuawei(f, "p60", user: "bob")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.probeAgain(only: "p60")
        #expect(try await f.delivery(of: "p60").state == "sent")
        // Each further try (a probe a minute, while the problem lasts: on a busy machine the
        // probe's all-clear may come in too late to count) disables a phone refused so.
        for _ in 0..<4 {
            let states = [try await f.delivery(of: "mate").state, try await f.delivery(of: "nova").state]
            if states.allSatisfy({ $0 == "token_invalid" }) { break }
            try await f.probeAgain()
        }
        #expect(try await f.delivery(of: "p60").state == "sent")
        let mate = try await f.delivery(of: "mate")
        #expect(mate.state == "token_invalid", "\(mate)")
        #expect(try await f.delivery(of: "nova").state == "token_invalid")
        _ = secret
    }

    /// Whether the app's credentials were ever accepted is known to every daemon
    /// (`herald.accepted_credentials`): after a restart, or on another daemon, a phone Push Kit
    /// calls invalid (80300007) is disabled at once, with no false configuration problem holding
    /// back the app's other Huawei phones.
    @Test func credentialsAcceptedBeforeARestartAreStillKnownAfterIt() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        _ = try await registerHuawei(f, "mate")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate").state == "sent")
        let kept = try await f.db.query("SELECT app_id, account FROM herald.accepted_credentials")
        #expect(kept.count == 1)
        #expect(try kept.first?.decode(1, as: String.self) == Self.clientID)

        // A daemon started since, with nothing in its memory: a dead phone is that phone's.
        let restarted = await f.restartedContext()
        let dead = try await registerHuawei(f, "old-mate", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: dead)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await DispatchWorker(context: restarted).drain()
        let refused = try await f.delivery(of: "old-mate")
        #expect(refused.state == "token_invalid" && refused.error?.contains("80300007") == true, "\(refused)")
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty)
        _ = secret
    }

    /// Credentials Huawei refuses are the app's configuration, scoped to Push Kit: its Huawei
    /// phones wait (not an attempt lost to each), its other phones are sent, and no phone is
    /// disabled; fixed, the next probe sends them.
    @Test func refusedCredentialsHoldBackOnlyTheAppsHuaweiPhones() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f, secret: "a-wrong-secret")
        _ = try await registerHuawei(f, "mate")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let waiting = try await f.delivery(of: "mate")
        #expect(waiting.state == "queued" && waiting.error?.contains("client_secret is wrong") == true, "\(waiting)")
        let problem = try await f.db.query("SELECT scope, config_error FROM herald.app_problems")
        #expect(problem.count == 1)
        #expect(try problem[0].decode(0, as: String.self) == "hms")
        #expect(try problem[0].decode(1, as: String.self).contains("refused app \(Self.clientID)"))
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
        #expect(
            try String(contentsOfFile: secret.path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                == "a-wrong-secret")

        // Fixed: the app's row changes, the route is made again, and the next probe (a minute
        // on) sends.
        let fixed = try SecretFile(contents: "the-real-secret", suffix: ".secret")
        try await f.db.query("UPDATE herald.app_hms SET client_secret_file = $1", [fixed.path])
        try await f.probeAgain()
        #expect(try await f.delivery(of: "mate").state == "sent")
        // The problem ends with the probe's answer, or, when that answer comes in after its claim
        // was recorded (a busy machine), with the retry worker's check that nothing waits on it.
        try await f.db.query("SELECT herald.clear_idle_config_problems(now() + interval '5 minutes')")
        let left = try await f.db.query("SELECT config_error FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(left.isEmpty, "\(left)")
    }

    /// An access token Push Kit stops taking (80200003) is fetched again and the message sent.
    @Test func anExpiredAccessTokenIsFetchedAgain() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        _ = try await registerHuawei(f, "mate")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'first')")
        try await f.ingest()
        try await f.dispatch()
        await f.emulator.expireHMSAccessTokens()
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'second')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "mate").state == "sent")
        #expect(await f.emulator.hmsReceived.count == 2)
        #expect(await f.emulator.hmsTokenRequests == 2)
        _ = secret
    }

    /// Traffic control (503) waits without spending the delivery's attempts, and the app's other
    /// sends wait with it rather than being refused in turn, on every daemon.
    @Test func trafficControlPausesTheAppWithoutSpendingAnAttempt() async throws {
        let clock = ManualClock.aheadOfTheDatabase()
        let f = try await WorkerFixture.make(clock: clock)
        let secret = try await huaweiApp(f)
        let token = try await registerHuawei(f, "mate")
        _ = try await registerHuawei(f, "nova", user: "bob")
        await f.emulator.setBehaviour(.unavailable(retryAfter: 2), forToken: token, times: 1)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let row = try await f.db.query("SELECT state, attempts, last_error, run_at FROM herald.deliveries")[0]
        #expect(try row.decode(0, as: String.self) == "queued")
        #expect(try row.decode(1, as: Int.self) == 0, "not an attempt")
        #expect(try row.decode(2, as: String.self).contains("traffic control"))
        #expect(abs(try row.decode(3, as: Date.self).timeIntervalSince(clock.now()) - 2) < 0.001, "Push Kit's 2 s")
        // Bob's phone, meanwhile: it waits for the pause, unsent, whichever daemon claims it.
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await DispatchWorker(context: await f.restartedContext()).drain()
        #expect(try await f.delivery(of: "nova").state == "queued")
        #expect(await f.emulator.hmsReceived.isEmpty)
        clock.advance(by: .seconds(2))
        try await f.dispatch()
        let sent = try await f.delivery(of: "mate")
        #expect(sent.state == "sent")
        #expect(try await f.delivery(of: "nova").state == "sent")
        // Sent, it shows no error; what it waited for is its history.
        #expect(sent.error == nil, "\(sent)")
        let history = try await f.db.query(
            "SELECT array_to_string(error_history, ' ') FROM herald.deliveries d JOIN herald.devices v"
                + " ON v.id = d.device_id WHERE v.device_id = 'mate'")[0].decode(0, as: String.self)
        #expect(history.contains("waiting: the provider holds the sender back") && history.contains("traffic control"))
        _ = secret
    }

    /// Urgent (HIGH) messages need a right Huawei grants per app: without it, Push Kit refuses
    /// them (80300011), and the message goes again as NORMAL, as does every one after it.
    @Test func withoutTheRightToUrgentMessagesTheyGoAsNormal() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        _ = try await registerHuawei(f, "mate")
        for title in ["first", "second"] {
            try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => $1)", [title])
            try await f.ingest()
            try await f.dispatch()
            #expect(try await f.delivery(of: "mate").state == "sent")
        }
        let urgencies = await f.emulator.hmsReceived.map {
            ($0.message["android"] as? [String: Any])?["urgency"] as? String
        }
        #expect(urgencies == ["NORMAL", "NORMAL"])
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty)

        // An app with the right sends urgent messages as such.
        let g = try await WorkerFixture.make()
        await g.emulator.registerHMSApp(clientID: Self.clientID, secret: "the-real-secret", urgent: true)
        try await g.db.query(
            "INSERT INTO herald.app_hms (app_id, client_id, client_secret_file) VALUES ('shop', $1, $2)",
            [Self.clientID, secret.path])
        _ = try await registerHuawei(g, "mate")
        try await g.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'urgent')")
        try await g.ingest()
        try await g.dispatch()
        let urgent = await g.emulator.hmsReceived.map {
            ($0.message["android"] as? [String: Any])?["urgency"] as? String
        }
        #expect(urgent == ["HIGH"])
    }

    /// What Push Kit refuses about a message is that message's failure, in Huawei's words,
    /// whatever control characters a hostile answer holds.
    @Test func aRefusedMessageFailsAloneInHuaweisWords() async throws {
        let f = try await WorkerFixture.make()
        let secret = try await huaweiApp(f)
        let token = try await registerHuawei(f, "mate")
        _ = try await registerHuawei(f, "nova")
        await f.emulator.setBehaviour(.garbledAnswer, forToken: token)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let failed = try await f.delivery(of: "mate")
        #expect(failed.state == "failed" && failed.error?.contains("80100003") == true, "\(failed)")
        #expect(try await f.delivery(of: "nova").state == "sent")
        _ = secret
    }
}
