import Foundation
import HeraldDaemon
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct LoggingTests {
    /// The whole pipeline at trace level, with a dead token and an app whose credentials file
    /// holds a bare private key: no log line carries a key, an access token or a whole push token.
    @Test func secretsNeverReachTheLogs() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "shop-prod")
        let contents = try account.fileContents()
        let privateKey = try #require(
            (try JSONSerialization.jsonObject(with: contents) as? [String: Any])?["private_key"] as? String)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("logs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("sa.json")
        let bare = directory.appendingPathComponent("bare-key.json")
        try contents.write(to: good)
        try privateKey.write(to: bare, atomically: true, encoding: .utf8)

        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let tokens = (1...3).map { _ in "fcm-token-" + UUID().uuidString + UUID().uuidString }
        try await db.addApp("shop", fcmProject: "shop-prod", credentialsFile: good.path)
        try await db.addApp("leaky", fcmProject: "leaky", credentialsFile: bare.path)
        try await db.query("SELECT herald.register_device('shop', 'iphone', 'ios', $1, 'alice')", [tokens[0]])
        try await db.query("SELECT herald.register_device('shop', 'pixel', 'android', $1, 'alice')", [tokens[1]])
        try await db.query("SELECT herald.register_device('leaky', 'other', 'android', $1, 'bob')", [tokens[2]])
        await emulator.setBehaviour(.unregistered, forToken: tokens[1])
        try await db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await db.query("SELECT herald.send('leaky', user_ref => 'bob', title => 'Hi')")

        let daemon = try HeraldProcess(
            ["run", "--log-format", "json"],
            environment: [
                "HERALD_DATABASE_URL": database.conninfo, "HERALD_LOG_LEVEL": "trace",
                "HERALD_FCM_ENDPOINT": emulator.baseURL, "HERALD_POLL_INTERVAL": "200ms",
            ])
        #expect(
            try await eventually(timeout: .seconds(20)) {
                try await db.query(
                    "SELECT count(*) FROM herald.deliveries WHERE state IN ('sent', 'token_invalid')")[0].decode(
                        0, as: Int.self) == 2
            }, "\(daemon.output)")
        let reference = try await db.query(
            "SELECT herald.delivery_reference(d.id, d.device_id) FROM herald.deliveries d WHERE d.state = 'sent'")[0]
            .decode(0, as: String.self)
        _ = try await db.query("SELECT herald.report_delivery($1)", [reference])
        #expect(
            try await eventually {
                try await db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'delivered'")[0].decode(
                    0, as: Int.self) == 1
            })
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(60)))

        let output = daemon.output
        let lines = output.split(separator: "\n")
        #expect(lines.count > 10)
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["message"] != nil && object?["level"] != nil && object?["time"] != nil, "\(line)")
        }
        #expect(output.contains("leaky"), "the broken app is reported")
        #expect(output.contains("fcm-toke…"), "a dead token appears as its hint")
        for token in tokens { #expect(!output.contains(token), "a whole push token leaked") }
        let accessTokens = await emulator.issuedAccessTokens
        #expect(!accessTokens.isEmpty)
        for token in accessTokens { #expect(!output.contains(token), "an access token leaked") }
        #expect(!output.contains("PRIVATE KEY"))
        let keyLine = try #require(privateKey.split(separator: "\n").dropFirst(2).first)
        #expect(!output.contains(keyLine), "part of the private key leaked")
    }

    @Test func redactionMasksWhatLooksSecretAndTextSuitsJournald() {
        // A PEM-shaped fragment, assembled here so that no tracked file holds a key header.
        let pem = ["BEGIN", "END"].map { "-----\($0) PRIVATE" + " KEY-----" }
        let line = LogRedaction.redact(
            "oops Authorization: Bearer ya29.a0AfH6SM \(pem[0])\nMIIEv\n\(pem[1]) eyJhbGciOi.eyJpc3Mi.c2lnbmF0dXJl")
        #expect(!line.contains("ya29.a0"))
        #expect(!line.contains("MIIEv"))
        #expect(!line.contains("eyJpc3Mi"))
        #expect(line.contains("oops"))

        let journald = LineLogHandler(
            label: "herald", level: .info, format: .text, environment: ["JOURNAL_STREAM": "8:1"])
        let text = journald.line(level: .warning, message: "lost", metadata: ["kind": "dispatch"], source: "x")
        #expect(text == "<4>warning herald: lost kind=dispatch")
        let json = LineLogHandler(label: "herald", level: .info, format: .json, environment: [:])
            .line(level: .info, message: "token Bearer abc.def", metadata: ["count": "3"], source: "HeraldWorkers")
        let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
        #expect(object?["message"] as? String == "token Bearer [redacted]")
        #expect(object?["count"] as? String == "3")
    }

    /// A push service's answer, a channel's name or a device id cannot forge a log line or a
    /// field, in either format (issue #40): a 410 body with a newline and `<0>` (an emergency
    /// under journald), a name with spaces and `=`, escape sequences.
    @Test func valuesFromOutsideCannotForgeLinesOrFields() throws {
        let forged = "gone\n<0>herald.dispatch: FORGED app=bank"
        let metadata: Logger.Metadata = [
            "reason": "\(forged)", "channel": "match 7 app=bank", "device": "tab\r\u{1b}[2J\u{85}\u{7f}",
            "quoted": "say \"hi\" \\o/",
        ]
        let journald = LineLogHandler(
            label: "herald", level: .info, format: .text, environment: ["JOURNAL_STREAM": "8:1"])
        let text = journald.line(level: .error, message: "refused:\n<0>FORGED", metadata: metadata, source: "x")
        #expect(!text.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(text)")
        // Keys sorted; each value whole inside its quotes, so nothing reads as a field of its own.
        #expect(
            text == #"<3>error herald: refused:\n<0>FORGED channel="match 7 app=bank" "#
                + #"device="tab\r\u{1b}[2J\u{85}\u{7f}" quoted="say \"hi\" \\o/" "#
                + #"reason="gone\n<0>herald.dispatch: FORGED app=bank""#, "\(text)")

        let json = LineLogHandler(label: "herald", level: .info, format: .json, environment: [:])
            .line(level: .error, message: "refused:\n<0>FORGED", metadata: metadata, source: "x")
        #expect(!json.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(json)")
        let object = try #require((try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any])
        #expect(object["reason"] as? String == forged, "read back whole")
        #expect(object["channel"] as? String == "match 7 app=bank")
    }
}
