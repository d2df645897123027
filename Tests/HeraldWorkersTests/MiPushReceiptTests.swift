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

/// Mi Push's receipts, end to end: with a public URL, each message names its callback and carries
/// its delivery's report reference; the stand-in posts what became of it as Mi Push does, and
/// each receipt, which Mi Push does not sign, proves itself by its reference.
@Suite struct MiPushReceiptTests {
    static let publicURL = "https://push.example.com"

    struct Running {
        let f: WorkerFixture
        let base: String
        let server: Task<Void, any Error>
        let secret: SecretFile
        let http = HTTPClient()

        func post(
            types: [String: Int] = [:], barOff: Set<String> = [], app: String = "shop", at: Date = Date()
        ) async throws -> Int {
            try await http.send(
                await f.emulator.miPushReceipts(
                    to: "\(base)/v1/receipts/xiaomi/\(app)", types: types, barOff: barOff, at: at)
            ).status
        }

        func receipts() async throws -> [String: String] {
            try await PushKitReceiptTests.Running.receipts(f.db)
        }

        func devices() async throws -> [String: String] {
            try await PushKitReceiptTests.Running.devices(f.db)
        }
    }

    func start(phones: [String] = ["redmi", "poco"]) async throws -> Running {
        let f = try await WorkerFixture.make()
        let xiaomi = XiaomiDispatchTests()
        let secret = try await xiaomi.xiaomiApp(f)
        for (index, phone) in phones.enumerated() {
            _ = try await xiaomi.registerXiaomi(f, phone, user: "user\(index)")
            try await f.db.query("SELECT herald.send('shop', user_ref => $1, title => 'Shipped')", ["user\(index)"])
        }
        try await f.ingest()
        try await DispatchWorker(context: f.context, publicURL: Self.publicURL).drain()
        let (base, server) = try await PushKitReceiptTests.receiptEndpoint(f)
        return Running(f: f, base: base, server: server, secret: secret)
    }

    func regID(_ phone: String) -> String { "d//igwEhgBGCI2TG6lWqlK" + String(repeating: "Q", count: 20) + phone }

    /// Each message names the daemon's receipt URL and its delivery's reference; a delivered one is
    /// recorded, an invalid target disables that phone alone, and a phone whose notifications are
    /// off is marked, not disabled.
    @Test func eachMessageAsksForItsReceiptAndEachReceiptActsOnItsPhone() async throws {
        let r = try await start(phones: ["redmi", "poco", "mix"])
        defer { r.server.cancel() }
        let sent = await r.f.emulator.xiaomiReceived
        #expect(sent.count == 3)
        for message in sent {
            #expect(message.fields["extra.callback"] == "\(Self.publicURL)/v1/receipts/xiaomi/shop")
            #expect(message.fields["extra.callback.param"] == message.payload["herald_report"])
            #expect(message.fields["extra.callback.type"] == "243")
        }
        #expect(try await r.post(types: [regID("poco"): 16], barOff: [regID("mix")]) == 200)
        let receipts = try await r.receipts()
        #expect(receipts["redmi"] == "delivered: Mi Push receipt 1: delivered to the phone")
        #expect(receipts["poco"]?.hasPrefix("not_delivered: Mi Push receipt 16: the target is invalid") == true)
        #expect(receipts["mix"]?.contains("notifications for the app are turned off") == true)
        #expect(
            try await r.devices() == [
                "redmi": "enabled", "poco": "token_invalid", "mix": "enabled, notifications off",
            ])
        _ = r.secret
    }

    /// Mi Push signs nothing: a receipt whose reference Herald did not make, one of another app's
    /// delivery posted under this app, or one for another phone's token, changes nothing; a post
    /// again changes nothing more.
    @Test func aReceiptProvesItselfByItsReference() async throws {
        let r = try await start(phones: ["redmi"])
        defer { r.server.cancel() }
        let sent = try #require(await r.f.emulator.xiaomiReceived.first)
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        func post(_ messages: [String: Any], app: String = "shop") async throws -> Int {
            let json = String(decoding: try JSONSerialization.data(withJSONObject: messages), as: UTF8.self)
            let data = json.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            return try await r.http.send(
                HTTPRequest(
                    method: "POST", url: "\(r.base)/v1/receipts/xiaomi/\(app)",
                    headers: [("Content-Type", "application/x-www-form-urlencoded")],
                    body: [UInt8]("data=\(data)".utf8))
            ).status
        }
        let reference = try #require(sent.fields["extra.callback.param"])
        let forged = String(reference.dropLast()) + (reference.last == "A" ? "B" : "A")
        #expect(
            try await post([sent.messageID: ["param": forged, "type": 16, "targets": sent.regID, "timestamp": millis]])
                == 200)
        #expect(
            try await post([
                sent.messageID: ["param": reference, "type": 16, "targets": regID("other"), "timestamp": millis]
            ]) == 200)
        try await r.f.db.query("INSERT INTO herald.apps (app_id) VALUES ('other')")
        #expect(
            try await post(
                [sent.messageID: ["param": reference, "type": 16, "targets": sent.regID, "timestamp": millis]],
                app: "other") == 200)
        #expect(try await post(["x": "not a receipt"]) == 200)
        #expect(try await r.receipts() == ["redmi": "-"])
        #expect(try await r.devices() == ["redmi": "enabled"])
        // The real one, twice.
        #expect(try await r.post() == 200)
        #expect(try await r.post(types: [regID("redmi"): 16], at: Date().addingTimeInterval(5)) == 200)
        #expect(try await r.receipts()["redmi"]?.hasPrefix("delivered") == true)
        #expect(try await r.devices() == ["redmi": "enabled"])
        _ = r.secret
    }

    /// Without a public URL, a message asks for no receipt.
    @Test func withoutAPublicURLNoReceiptIsAskedFor() async throws {
        let f = try await WorkerFixture.make()
        let xiaomi = XiaomiDispatchTests()
        let secret = try await xiaomi.xiaomiApp(f)
        _ = try await xiaomi.registerXiaomi(f, "redmi")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        try await f.dispatch()
        let sent = try #require(await f.emulator.xiaomiReceived.first)
        #expect(sent.fields["extra.callback"] == nil && sent.fields["extra.callback.param"] == nil)
        _ = secret
    }
}
