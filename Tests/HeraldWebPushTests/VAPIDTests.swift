import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import HeraldTestSupport
import HeraldWebPush
import Testing

/// VAPID (RFC 8292) tokens, checked by the `openssl` command line, and the answers of push
/// services (RFC 8030) as outcomes.
@Suite final class VAPIDTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-vapid-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    func openssl(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await runProgram("/usr/bin/openssl", arguments)
    }

    @Test func theTokenVerifiesWithOpenSSLAndNamesTheOrigin() async throws {
        // A key made by openssl, loaded as an app's key file is.
        try await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("vapid.pem")])
        let key = try VAPIDKey.load(file: path("vapid.pem"), subject: "mailto:ops@example.com")
        let publicDER = try await openssl(["ec", "-in", path("vapid.pem"), "-pubout", "-out", path("public.pem")])
        #expect(publicDER.status == 0)
        // k= is the uncompressed point openssl derives from the same file.
        try await openssl([
            "ec", "-in", path("vapid.pem"), "-pubout", "-conv_form", "uncompressed", "-outform", "DER", "-out",
            path("public.der"),
        ])
        let der = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("public.der"))))
        #expect(Base64URL.encode(der.suffix(65)) == key.publicKey)

        let clock = ManualClock()
        let authorizations = VAPIDAuthorizations(key: key, clock: clock)
        let header = try await authorizations.header(for: "https://fcm.googleapis.com")
        #expect(header.hasPrefix("vapid t="))
        #expect(header.hasSuffix(", k=\(key.publicKey)"))
        let token = String(header.dropFirst("vapid t=".count).prefix { $0 != "," })
        let parts = try #require(JWT.decode(token))
        #expect(parts.header["alg"] as? String == "ES256")
        #expect(parts.claims["aud"] as? String == "https://fcm.googleapis.com")
        #expect(parts.claims["sub"] as? String == "mailto:ops@example.com")
        let expiry = try #require(parts.claims["exp"] as? Int)
        let now = Int(clock.now().timeIntervalSince1970)
        #expect(expiry > now && expiry <= now + 24 * 3600)

        // openssl verifies DER signatures: rebuild one from the JWS r ‖ s.
        let signature = parts.signature
        #expect(signature.count == 64)
        let hex = { (bytes: ArraySlice<UInt8>) in bytes.map { String(format: "%02X", $0) }.joined() }
        try
            "asn1=SEQUENCE:signature\n[signature]\nr=INTEGER:0x\(hex(signature[0..<32]))\ns=INTEGER:0x\(hex(signature[32...]))\n"
            .write(toFile: path("signature.conf"), atomically: true, encoding: .utf8)
        try await openssl(["asn1parse", "-genconf", path("signature.conf"), "-out", path("signature.der")])
        try Data(parts.signingInput).write(to: URL(fileURLWithPath: path("input")))
        let verified = try await openssl([
            "dgst", "-sha256", "-verify", path("public.pem"), "-signature", path("signature.der"), path("input"),
        ])
        #expect(verified.output.contains("Verified OK"), "\(verified.output)")
        // And a changed input does not verify, so the check above can fail.
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: path("input")))
        let refused = try await openssl([
            "dgst", "-sha256", "-verify", path("public.pem"), "-signature", path("signature.der"), path("input"),
        ])
        #expect(refused.status != 0)
    }

    @Test func oneTokenPerOriginUntilAnHourBeforeItExpires() async throws {
        let clock = ManualClock()
        let authorizations = VAPIDAuthorizations(
            key: try VAPIDKey(key: try CryptoKey.generateP256(), subject: "https://example.com/contact"), clock: clock)
        let first = try await authorizations.header(for: "https://fcm.googleapis.com")
        #expect(try await authorizations.header(for: "https://fcm.googleapis.com") == first)
        let mozilla = try await authorizations.header(for: "https://updates.push.services.mozilla.com")
        #expect(mozilla != first)
        #expect(await authorizations.signed == 2)
        clock.advance(by: .seconds(VAPIDAuthorizations.lifetime - VAPIDAuthorizations.renewal - 60))
        #expect(try await authorizations.header(for: "https://fcm.googleapis.com") == first)
        clock.advance(by: .seconds(120))
        #expect(try await authorizations.header(for: "https://fcm.googleapis.com") != first)
        #expect(await authorizations.signed == 3)
    }

    @Test func aKeyOrSubjectThatCannotServeIsRefused() async throws {
        #expect(throws: WebPushError.self) {
            try VAPIDKey(key: try CryptoKey.generateRSA(bits: 1024), subject: "mailto:a@example.com")
        }
        #expect(throws: WebPushError.self) {
            try VAPIDKey(key: try CryptoKey.generateP256(), subject: "ops@example.com")
        }
        #expect(throws: WebPushError.self) { try VAPIDKey.load(file: path("missing.pem"), subject: "mailto:a@b.c") }
    }

    @Test(arguments: [
        (201, [("Location", "https://push.example.net/m/1")], "", "sent"),
        (404, [], "", "token"), (410, [], "", "token"),
        (413, [], "", "permanent"),
        (429, [("Retry-After", "30")], "", "retry"), (503, [], "", "retry"), (500, [], "", "retry"),
        (403, [], "", "configuration"), (401, [], "", "configuration"),
        (400, [], "invalid VAPID JWT", "configuration"), (400, [], "bad Topic", "permanent"),
    ])
    func answersBecomeOutcomes(status: Int, headers: [(String, String)], body: String, expected: String) {
        let outcome = WebPushClient.classify(
            HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), now: Date())
        switch (outcome, expected) {
        case (.sent(let location, _), "sent"): #expect(location == "https://push.example.net/m/1")
        case (.tokenInvalid, "token"), (.permanentFailure, "permanent"): break
        case (.retry(let after, _), "retry"): #expect(after == (status == 429 ? .seconds(30) : nil))
        case (.configurationError(_, let scope), "configuration"): #expect(scope == .web)
        default: Issue.record("\(status) \(body): \(outcome), expected \(expected)")
        }
    }

    @Test func topicsAreValidAndStable() {
        #expect(WebPushClient.topic("order-42") == "order-42")
        let long = WebPushClient.topic("order 42 shipped: your parcel is on its way")
        #expect(long.count == 32)
        #expect(long.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(WebPushClient.topic("order 42 shipped: your parcel is on its way") == long)
        #expect(WebPushClient.topic("order 43 shipped: your parcel is on its way") != long)
    }
}
