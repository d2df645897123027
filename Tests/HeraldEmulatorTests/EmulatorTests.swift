import Foundation
import HeraldCrypto
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import Testing

/// The emulator answers as FCM and Google's token endpoint do, so what passes against it
/// passes against them: these are its own promises, checked over raw HTTP.
@Suite struct EmulatorTests {
    func send(_ emulator: Emulator, token: String?, _ body: String, client: HTTPClient = HTTPClient()) async throws
        -> HTTPResponse
    {
        var headers: [(name: String, value: String)] = [("content-type", "application/json")]
        if let token { headers.append(("authorization", "Bearer \(token)")) }
        return try await client.send(
            HTTPRequest(
                url: emulator.baseURL + "/v1/projects/p/messages:send", headers: headers, body: Array(body.utf8)))
    }

    @Test func sendsNeedAnAccessTokenItIssued() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        let message = #"{"message": {"token": "device-1", "data": {"k": "v"}}}"#

        let anonymous = try await send(emulator, token: nil, message)
        #expect(anonymous.status == 401)
        #expect(anonymous.bodyText.contains("UNAUTHENTICATED"))
        let madeUp = try await send(emulator, token: "ya29.made-up", message)
        #expect(madeUp.status == 401)

        let token = try await AccessTokenSource(account: account, http: HTTPClient()).token()
        let sent = try await send(emulator, token: token, message)
        #expect(sent.status == 200, "\(sent.bodyText)")
        #expect(sent.bodyText.contains(#""name":"projects/p/messages/"#))
        #expect(await emulator.received.map(\.target) == ["device-1"])
    }

    @Test func aMessageFCMWouldRefuseIsRefusedInFCMsWords() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        let token = try await AccessTokenSource(account: account, http: HTTPClient()).token()

        let notAString = try await send(emulator, token: token, #"{"message": {"token": "t", "data": {"n": 1}}}"#)
        #expect(notAString.status == 400)
        #expect(notAString.bodyText.contains("INVALID_ARGUMENT"))
        #expect(notAString.bodyText.contains("message.data[n].value"), "\(notAString.bodyText)")

        let twoTargets = try await send(emulator, token: token, #"{"message": {"token": "t", "topic": "news"}}"#)
        #expect(twoTargets.status == 400)
        #expect(twoTargets.bodyText.contains("Exactly one of token, topic, condition or fid"))

        let tooBig = String(repeating: "x", count: 5000)
        let oversized = try await send(
            emulator, token: token, #"{"message": {"token": "t", "data": {"k": "\#(tooBig)"}}}"#)
        #expect(oversized.status == 400)
        #expect(oversized.bodyText.contains("too big"))
        #expect(await emulator.received.isEmpty)
    }

    /// The token endpoint checks the assertion's RS256 signature against the account's key.
    @Test func anAssertionSignedWithAnotherKeyGetsNoToken() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        // Another account the emulator trusts, with a key of its own (made accounts share one).
        let other = try ServiceAccount.generate(projectID: "other", tokenURI: emulator.tokenURI)
        try await emulator.register(other)
        let impostor = ServiceAccount(
            clientEmail: account.clientEmail, privateKeyID: account.privateKeyID, projectID: account.projectID,
            tokenURI: account.tokenURI, key: other.key)
        let source = AccessTokenSource(account: impostor, http: HTTPClient())
        await #expect(throws: (any Error).self) { try await source.token() }
        #expect(await emulator.issuedAccessTokens.isEmpty)
    }

    /// FCM's store for an offline phone, driven over HTTP as an app developer would: four
    /// collapse keys, 100 messages, then everything dropped and `onDeletedMessages()` once the
    /// phone is back; a phone judged inactive loses what comes.
    @Test func anOfflinePhonesStoreIsFCMs() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        let token = try await AccessTokenSource(account: account, http: HTTPClient()).token()
        let client = HTTPClient()
        func device(_ body: String) async throws -> [String: Any] {
            let answer = try await client.send(
                HTTPRequest(
                    url: emulator.baseURL + "/emulator/fcm-devices", headers: [("content-type", "application/json")],
                    body: Array(body.utf8)))
            #expect(answer.status == 200, "\(answer.bodyText)")
            return try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any] ?? [:]
        }
        func message(_ target: String, _ n: Int, collapseKey: String? = nil) async throws {
            let collapse = collapseKey.map { #", "android": {"collapse_key": "\#($0)"}"# } ?? ""
            let sent = try await send(
                emulator, token: token, #"{"message": {"token": "\#(target)", "data": {"n": "\#(n)"}\#(collapse)}}"#,
                client: client)
            #expect(sent.status == 200)
        }
        _ = try await device(#"{"token": "phone", "online": false}"#)
        for key in ["a", "b", "c", "d", "e", "a"] { try await message("phone", 0, collapseKey: key) }
        for n in 1...100 { try await message("phone", n) }
        var phone = try await device(#"{"token": "phone", "online": true}"#)
        #expect(phone["deleted_notices"] as? Int == 0)
        #expect((phone["received"] as? [Any])?.count == 104, "100 messages and one for each of 4 collapse keys")

        _ = try await device(#"{"token": "phone", "online": false}"#)
        for n in 1...101 { try await message("phone", n) }
        phone = try await device(#"{"token": "phone", "online": true}"#)
        #expect(phone["deleted_notices"] as? Int == 1)
        #expect((phone["received"] as? [Any])?.count == 104, "the 101st dropped them all")

        _ = try await device(#"{"token": "old", "inactive": true}"#)
        try await message("old", 1)
        let old = try await device(#"{"token": "old", "online": true}"#)
        #expect(old["deleted_notices"] as? Int == 1)
        #expect((old["received"] as? [Any])?.isEmpty == true)
    }
}
