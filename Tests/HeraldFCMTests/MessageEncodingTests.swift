import Foundation
import HeraldCrypto
import HeraldFCM
import Testing

@Suite struct MessageEncodingTests {
    @Test func durationsUseProtobufJSONForm() {
        #expect(FCMMessage.durationString(.seconds(3600)) == "3600s")
        #expect(FCMMessage.durationString(.milliseconds(3500)) == "3.5s")
        #expect(FCMMessage.durationString(.zero) == "0s")
        #expect(FCMMessage.durationString(.nanoseconds(1)) == "0.000000001s")
    }

    @Test func sendBodyIsValidJSONWithEscapedText() throws {
        let message = FCMMessage(
            target: .token("tok"),
            data: [("title", "Quote \" back\\slash\nnew line \u{1}"), ("emoji", "🚀 עברית")],
            android: .init(priority: .high, ttl: .seconds(86400), collapseKey: "c"))
        let body = message.sendRequestBody(validateOnly: true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        #expect(object["validate_only"] as? Bool == true)
        let decoded = try #require(object["message"] as? [String: Any])
        #expect(decoded["token"] as? String == "tok")
        let data = try #require(decoded["data"] as? [String: String])
        #expect(data["title"] == "Quote \" back\\slash\nnew line \u{1}")
        #expect(data["emoji"] == "🚀 עברית")
        let android = try #require(decoded["android"] as? [String: Any])
        #expect(android["priority"] as? String == "HIGH")
        #expect(android["ttl"] as? String == "86400s")
        #expect(android["collapse_key"] as? String == "c")
    }

    @Test func serviceAccountFileRoundTripsAndNeverPrintsItsKey() throws {
        let account = try ServiceAccount.generate(projectID: "p", tokenURI: "http://127.0.0.1:1/token")
        let parsed = try ServiceAccount.parse(try account.fileContents(), source: "test.json")
        #expect(parsed.clientEmail == account.clientEmail)
        #expect(parsed.tokenURI == "http://127.0.0.1:1/token")
        #expect(!"\(parsed)".contains("PRIVATE"))
        #expect(!String(reflecting: parsed).contains("BEGIN"))
    }

    @Test func serviceAccountErrorsSayWhatToFix() throws {
        #expect {
            try ServiceAccount.parse(Data(#"{"type":"service_account","project_id":"p"}"#.utf8), source: "sa.json")
        } throws: {
            "\($0)".contains("sa.json has no \"private_key\"")
        }
        #expect { try ServiceAccount.parse(Data("[1]".utf8), source: "sa.json") } throws: {
            "\($0)".contains("not a JSON object")
        }
        #expect { try ServiceAccount.load(file: "/nonexistent/sa.json") } throws: { "\($0)".contains("cannot read") }
    }

    @Test func jwtAssertionCarriesGooglesClaims() throws {
        let account = try ServiceAccount.generate(projectID: "p", tokenURI: "http://127.0.0.1:1/token")
        let issued = Date(timeIntervalSince1970: 1_800_000_000)
        let parts = try #require(JWT.decode(try JWT.serviceAccountAssertion(for: account, issuedAt: issued)))
        #expect(parts.header["alg"] as? String == "RS256")
        #expect(parts.header["typ"] as? String == "JWT")
        #expect(parts.header["kid"] as? String == account.privateKeyID)
        #expect(parts.claims["iss"] as? String == account.clientEmail)
        #expect(parts.claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(parts.claims["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(parts.claims["iat"] as? Int == 1_800_000_000)
        #expect(parts.claims["exp"] as? Int == 1_800_003_600)
        #expect(try account.key.verifyRS256(parts.signingInput, signature: parts.signature))
    }
}
