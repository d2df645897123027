import Foundation
import HeraldCore
import HeraldEmulator
import HeraldEndpoint
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// Huawei Push Kit's receipts, end to end: Herald sends through the stand-in, which then posts
/// the receipts Huawei would, signed, to the daemon's endpoint, and each is recorded on its
/// delivery and acts on its device; forged, stale, replayed, oversized and other apps' posts
/// are refused and change nothing.
@Suite struct PushKitReceiptTests {
    static let username = "herald-receipts"
    /// A callback key as AppGallery Connect generates it (Base64).
    static let key = Data((0..<32).map { UInt8($0 * 7 % 256) }).base64EncodedString()

    struct Running {
        let f: WorkerFixture
        let base: String
        let server: Task<Void, any Error>
        let keyFile: SecretFile
        let secret: SecretFile
        let http = HTTPClient()

        /// Posts what the stand-in would for what it took, and answers with the status and body.
        func post(
            harmony: Bool = false, version: Emulator.PushKitReceiptVersion = .v1, states: [String: Int] = [:],
            app: String = "shop", key: String = PushKitReceiptTests.key, at: Date = Date(), signedAt: Date? = nil,
            nonce: String = UUID().uuidString.lowercased()
        ) async throws -> (status: Int, body: String) {
            let request = await f.emulator.pushKitReceipts(
                harmony: harmony, to: "\(base)/v1/receipts/\(harmony ? "harmony" : "hms")/\(app)", version: version,
                username: PushKitReceiptTests.username, key: key, states: states, at: at, signedAt: signedAt,
                nonce: nonce)
            return try await send(request)
        }

        func send(_ request: HTTPRequest) async throws -> (status: Int, body: String) {
            let answer = try await http.send(request)
            return (answer.status, String(decoding: answer.body, as: UTF8.self))
        }

        /// Each delivery's receipt and its reason, by device.
        func receipts() async throws -> [String: String] { try await Self.receipts(f.db) }

        static func receipts(_ db: PostgresConnection) async throws -> [String: String] {
            let rows = try await db.query(
                """
                SELECT v.device_id, coalesce(d.receipt || ': ' || d.receipt_reason, '-')
                FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id
                """)
            return Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode(0), try $0.decode(1)) })
        }

        /// Each device's state: enabled, or why not; and whether its notifications are off.
        func devices() async throws -> [String: String] { try await Self.devices(f.db) }

        static func devices(_ db: PostgresConnection) async throws -> [String: String] {
            let rows = try await db.query(
                """
                SELECT device_id, coalesce(disabled_cause, 'enabled')
                       || CASE WHEN notifications_off_at IS NULL THEN '' ELSE ', notifications off' END
                FROM herald.devices
                """)
            return Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode(0), try $0.decode(1)) })
        }

        func changes() async throws -> [String] {
            try await f.db.query("SELECT device_id || ' ' || change FROM herald.device_changes ORDER BY id").map {
                try $0.decode(0)
            }
        }
    }

    /// Shop's Huawei (or HarmonyOS) app with receipts set up, its endpoint, and a message sent to
    /// each of `phones`.
    func start(harmony: Bool = false, phones: [String] = ["mate", "nova"]) async throws -> Running {
        let f = try await WorkerFixture.make()
        let secret =
            harmony ? try await HarmonyDispatchTests().harmonyApp(f) : try await HMSDispatchTests().huaweiApp(f)
        let keyFile = try SecretFile(contents: Self.key + "\n", suffix: ".key")
        try await f.db.query(
            "UPDATE herald.\(harmony ? "app_harmony" : "app_hms") SET receipt_username = $1, receipt_key_file = $2",
            [Self.username, keyFile.path])
        for (index, phone) in phones.enumerated() {
            let user = "user\(index)"
            _ =
                harmony
                ? try await HarmonyDispatchTests().registerPhone(f, phone, user: user)
                : try await HMSDispatchTests().registerHuawei(f, phone, user: user)
            try await f.db.query("SELECT herald.send('shop', user_ref => $1, title => 'Shipped')", [user])
        }
        try await f.ingest()
        try await f.dispatch()
        let (base, server) = try await Self.receiptEndpoint(f)
        return Running(f: f, base: base, server: server, keyFile: keyFile, secret: secret)
    }

    /// The app endpoint with every provider's receipt reader, as the daemon's role (which
    /// production runs it as): its base URL, and its task.
    static func receiptEndpoint(_ f: WorkerFixture) async throws -> (base: String, server: Task<Void, any Error>) {
        let (ports, listening) = AsyncStream<Int>.makeStream()
        var settings = Endpoint.Settings(host: "127.0.0.1", port: 0)
        settings.receiptReaders = ProviderReceipts.readers
        let endpoint = Endpoint(
            settings: settings, connections: [try await f.daemonConnection()], logger: Logger(label: "test"),
            onListening: { listening.yield($0) })
        let server = Task { try await endpoint.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        return ("http://127.0.0.1:\(port)", server)
    }

    func token(_ phone: String, harmony: Bool = false) -> String {
        harmony
            ? "MAMzLg" + String(repeating: "k", count: 40) + phone
            : "ANDmbp0J" + String(repeating: "x", count: 40) + phone
    }

    /// A V1 receipt for each Android phone: delivered is recorded, and "app not installed"
    /// disables that phone alone, as a dead token in an answer does; the backend hears of it in
    /// the device feed.
    @Test func anUninstalledAppDisablesThatPhoneAloneAndADeliveredOneIsRecorded() async throws {
        let r = try await start()
        defer { r.server.cancel() }
        let at = Date().addingTimeInterval(-2)
        let answer = try await r.post(states: [token("nova"): 2], at: at)
        #expect(answer.status == 200 && answer.body == #"{"code":"0","message":"success"}"#, "\(answer)")
        let receipts = try await r.receipts()
        #expect(receipts["mate"] == "delivered: Huawei Push Kit receipt 0: delivered to the device")
        #expect(
            receipts["nova"]?.hasPrefix("not_delivered: Huawei Push Kit receipt 2: the app is not installed") == true)
        #expect(try await r.devices() == ["mate": "enabled", "nova": "token_invalid"])
        #expect(try await r.changes() == ["nova token_invalid"])
        let when = try await r.f.db.query(
            "SELECT d.receipt_at, d.state FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = 'mate'"
        )[0]
        #expect(abs(try when.decode(0, as: Date.self).timeIntervalSince(at)) < 0.001, "the provider's time")
        #expect(try when.decode(1, as: String.self) == "sent", "the answer to the send stays as it was")
        _ = r.secret
    }

    /// HarmonyOS posts V2: notifications turned off marks the phone, which stays enabled, and a
    /// later delivered receipt clears it; the backend reads both in the device feed.
    @Test func notificationsTurnedOffMarkThePhoneUntilOneIsDelivered() async throws {
        let r = try await start(harmony: true, phones: ["p60"])
        defer { r.server.cancel() }
        let answer = try await r.post(harmony: true, version: .v2, states: [token("p60", harmony: true): 6])
        #expect(answer.status == 200, "\(answer)")
        #expect(try await r.devices() == ["p60": "enabled, notifications off"])
        #expect(try await r.receipts()["p60"]?.contains("notifications are turned off") == true)
        // The next notification reaches it.
        try await r.f.db.query("SELECT herald.send('shop', user_ref => 'user0', title => 'Again')")
        try await r.f.ingest()
        try await r.f.dispatch()
        #expect(try await r.post(harmony: true, version: .v2, at: Date().addingTimeInterval(1)).status == 200)
        #expect(try await r.devices() == ["p60": "enabled"])
        #expect(try await r.changes() == ["p60 notifications_off", "p60 notifications_on"])
        _ = r.secret
    }

    /// What no one but Huawei, with the app's key, could post is refused, and nothing changes:
    /// no key set, a wrong key, a signature too old, the same signature twice, a body too large
    /// or not receipts. A receipt repeated with a new signature changes nothing, and one that says
    /// less than the one recorded cannot take it back.
    @Test func forgedStaleReplayedAndOversizedPostsAreRefusedAndRepeatsChangeNothing() async throws {
        let r = try await start()
        defer { r.server.cancel() }
        let before = try await r.receipts()
        #expect(before == ["mate": "-", "nova": "-"])
        let wrongKey = try await r.post(key: Data(repeating: 1, count: 32).base64EncodedString())
        #expect(wrongKey.status == 401 && wrongKey.body.contains("signature does not match"), "\(wrongKey)")
        let stale = try await r.post(signedAt: Date().addingTimeInterval(-600))
        #expect(stale.status == 401 && stale.body.contains("more than 5 minutes"), "\(stale)")
        var unsigned = await r.f.emulator.pushKitReceipts(
            harmony: false, to: r.base + "/v1/receipts/hms/shop", version: .v1, username: Self.username, key: Self.key,
            at: Date())
        unsigned.headers.removeAll { $0.name == "X-HUAWEI-CALLBACK-ID" }
        #expect(try await r.send(unsigned).status == 401)
        var tooLarge = await r.f.emulator.pushKitReceipts(
            harmony: false, to: r.base + "/v1/receipts/hms/shop", version: .v1, username: Self.username, key: Self.key,
            at: Date())
        tooLarge.body =
            [UInt8](#"{"statuses":[""#.utf8) + [UInt8](repeating: 0x61, count: 1 << 20) + [UInt8](#""]}"#.utf8)
        #expect(try await r.send(tooLarge).status == 413)
        var garbled = tooLarge
        garbled.body = [UInt8]("statuses".utf8)
        let garbledAnswer = try await r.send(garbled)
        #expect(
            garbledAnswer.status == 400 && garbledAnswer.body.contains("not Push Kit's receipts"), "\(garbledAnswer)")
        // Another app, with its own key: shop's receipts posted under its name are its own, and
        // name no delivery of its.
        let otherKey = Data(repeating: 9, count: 32).base64EncodedString()
        let otherKeyFile = try SecretFile(contents: otherKey, suffix: ".key")
        try await r.f.db.query(
            """
            INSERT INTO herald.apps (app_id) VALUES ('other');
            """)
        try await r.f.db.query(
            """
            INSERT INTO herald.app_hms (app_id, client_id, client_secret_file, receipt_username, receipt_key_file)
            VALUES ('other', '7654321', $1, $2, $3)
            """, [r.secret.path, Self.username, otherKeyFile.path])
        let crossApp = try await r.post(app: "other", key: otherKey)
        #expect(crossApp.status == 200, "\(crossApp)")
        #expect(try await r.receipts() == before, "another app's post changes none of shop's")
        let noReceipts = try await r.post(app: "nobody")
        #expect(noReceipts.status == 403 && noReceipts.body.contains("takes no hms receipts"), "\(noReceipts)")
        #expect(try await r.receipts() == before)
        #expect(try await r.devices() == ["mate": "enabled", "nova": "enabled"])

        // Taken once; the same signature again is a replay.
        let nonce = UUID().uuidString.lowercased()
        let signedAt = Date()
        #expect(try await r.post(at: signedAt, nonce: nonce).status == 200)
        let replay = try await r.post(states: [token("mate"): 2], at: signedAt, nonce: nonce)
        #expect(replay.status == 401 && replay.body.contains("taken before"), "\(replay)")
        let recorded = try await r.receipts()
        #expect(recorded["mate"]?.hasPrefix("delivered") == true)
        // Repeated with a new signature, and then contradicted later: delivered stays, and the
        // phone is not disabled by a word that cannot come after delivery.
        #expect(try await r.post().status == 200)
        #expect(try await r.post(states: [token("mate"): 2], at: Date().addingTimeInterval(5)).status == 200)
        #expect(try await r.receipts() == recorded)
        #expect(try await r.devices() == ["mate": "enabled", "nova": "enabled"])
        _ = otherKeyFile
    }

    /// A status that is not one (no token, a NUL in it, a fraction for a code), or one for a token
    /// that is not the delivery's, or another send's, spoils only itself: posted alone, they change
    /// nothing; the good one after them is recorded.
    @Test func aStatusThatIsNotOneSpoilsOnlyItself() async throws {
        let r = try await start(phones: ["mate"])
        defer { r.server.cancel() }
        let sent = try #require(await r.f.emulator.hmsReceived.first)
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let tag = sent.receiptTag ?? ""
        func post(_ statuses: [[String: Any]]) async throws -> (status: Int, body: String) {
            var request = await r.f.emulator.pushKitReceipts(
                harmony: false, to: r.base + "/v1/receipts/hms/shop", version: .v1, username: Self.username,
                key: Self.key, at: Date())
            request.body = [UInt8](try JSONSerialization.data(withJSONObject: ["statuses": statuses]))
            return try await r.send(request)
        }
        let bad: [[String: Any]] = [
            ["biTag": tag, "status": 2, "timestamp": millis, "requestId": sent.requestID],
            ["token": "a\u{0}b", "biTag": tag, "status": 2, "timestamp": millis],
            ["token": sent.token, "biTag": tag, "status": 2.5, "timestamp": millis],
            ["token": sent.token, "biTag": tag, "status": 2, "timestamp": millis / 1000],
            ["token": sent.token + "x", "biTag": tag, "status": 2, "timestamp": millis, "requestId": sent.requestID],
            ["token": sent.token, "biTag": tag, "status": 2, "timestamp": millis, "requestId": "another-send"],
            ["token": sent.token, "biTag": "herald-1", "status": 2, "timestamp": millis],
        ]
        let answer = try await post(bad)
        #expect(answer.status == 200, "\(answer)")
        #expect(try await r.receipts() == ["mate": "-"])
        #expect(try await r.devices() == ["mate": "enabled"])
        // The same, to the HarmonyOS URL: none is a HarmonyOS delivery.
        let good: [String: Any] = [
            "token": sent.token, "biTag": tag, "status": 2, "timestamp": millis, "requestId": sent.requestID,
        ]
        #expect(try await post([good]).status == 200)
        #expect(try await r.receipts()["mate"]?.hasPrefix("not_delivered") == true)
        #expect(try await r.devices() == ["mate": "token_invalid"])
        _ = r.secret
    }

    /// A signature read again with its time in seconds and three digits moved into the nonce is
    /// the same HMAC: only milliseconds are taken, so it is no new signature.
    @Test func aSignatureCannotBeReadASecondWay() async throws {
        let r = try await start(phones: ["mate"])
        defer { r.server.cancel() }
        let at = Date()
        let nonce = "123" + UUID().uuidString.lowercased()
        #expect(try await r.post(at: at, nonce: nonce).status == 200)
        var again = await r.f.emulator.pushKitReceipts(
            harmony: false, to: r.base + "/v1/receipts/hms/shop", version: .v1, username: Self.username, key: Self.key,
            states: [token("mate"): 2], at: at, nonce: nonce)
        let header = try #require(again.headers.first { $0.name == "X-HUAWEI-CALLBACK-ID" }?.value)
        let millis = try #require(header.firstMatch(of: /timestamp=(\d{13});/).map { String($0.1) })
        again.headers.removeAll { $0.name == "X-HUAWEI-CALLBACK-ID" }
        again.headers.append(
            (
                "X-HUAWEI-CALLBACK-ID",
                header.replacingOccurrences(
                    of: "timestamp=\(millis); nonce=\(nonce)",
                    with: "timestamp=\(millis.prefix(10)); nonce=\(millis.suffix(3))\(nonce)")
            ))
        let answer = try await r.send(again)
        #expect(answer.status == 401 && answer.body.contains("13 digits"), "\(answer)")
        #expect(try await r.devices() == ["mate": "enabled"])
        _ = r.secret
    }
}
