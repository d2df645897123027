import Foundation
import HeraldCore
import HeraldHTTP
import Testing

@testable import HeraldPushKit
@testable import HeraldWorkers

/// Each of HarmonyOS Push Kit's documented result codes, and each reason a token is refused
/// under, comes to its outcome (docs/architecture.md, "HarmonyOS Push Kit").
@Suite struct HarmonyResultTests {
    func kind(_ status: Int, _ body: String, token: String = "token-1", proven: Bool = true) -> OutcomeKind {
        let result = HMSResult(HTTPResponse(status: status, headers: [], body: Array(body.utf8)))
        return OutcomeKind(result.harmonyOutcome(token: token, credentialsProven: proven), scope: .harmony)
    }

    func answer(_ code: String, _ msg: String = "words") -> String {
        #"{"code":"\#(code)","msg":"\#(msg)","requestId":"1573"}"#
    }

    /// `msg` as Push Kit writes it for refused tokens: JSON in a string, tokens by reason.
    func refused(_ code: String, _ reason: String, token: String = "token-1") -> String {
        answer(code, #"{\"success\":1,\"failure\":1,\"illegalTokens\":{\"\#(reason)\":[\"\#(token)\"]}}"#)
    }

    @Test func everyDocumentedCodeComesToItsOutcome() {
        #expect(kind(200, answer("80000000", "Success")) == .sent)
        for code in ["80200001", "80200005", "80300002", "80300036", "80300037"] {
            #expect(kind(401, answer(code)) == .configuration, "\(code)")
        }
        for code in ["80300029", "81000001"] {
            #expect(kind(500, answer(code)) == .retry, "\(code)")
        }
        for code in ["80100001", "80100003", "80100004", "80100022", "80300008", "80300010"] {
            #expect(kind(400, answer(code)) == .failed, "\(code)")
        }
        #expect(kind(503, "traffic control") == .overQuota)
        #expect(kind(503, answer("81000001")) == .overQuota, "a 503 is traffic control, whatever its code")
        #expect(kind(502, "<html>bad gateway</html>") == .retry)
        #expect(kind(404, "") == .configuration)
        #expect(kind(200, "{}") == .retry, "200 without a code is not a success")
    }

    @Test func aRefusedTokenIsJudgedByItsReason() {
        // Only this token's reason counts: a partial success refusing another token sent this one.
        #expect(kind(200, refused("80100000", "tokenFormatError", token: "token-2")) == .sent)
        for code in ["80100000", "80300007"] {
            #expect(kind(200, refused(code, "tokenFormatError")) == .tokenInvalid)
            #expect(kind(200, refused(code, "tokenPlatformNotSupport")) == .tokenInvalid)
            #expect(kind(200, refused(code, "noRight")) == .tokenInvalid)
            #expect(kind(200, refused(code, "noRight"), proven: false) == .configuration)
            for reason in ["noPushTypeRight", "appinfoError", "disableSendHuaweiMsgBecauseOfPenalty"] {
                #expect(kind(200, refused(code, reason)) == .configuration, "\(reason)")
            }
            #expect(kind(200, refused(code, "countryNotSupport")) == .failed)
            #expect(kind(200, refused(code, "aReasonNotKnownYet")) == .failed)
        }
        // All tokens refused without a readable list: the phone's once the account is proven.
        #expect(kind(200, answer("80300007", "All the tokens are invalid.")) == .tokenInvalid)
        #expect(kind(200, answer("80300007", "All the tokens are invalid."), proven: false) == .configuration)
    }

    /// A reason names no token: the refused one stays out of what operators read.
    @Test func reasonsNeverCarryTheToken() {
        let token = "MAMzLg" + String(repeating: "s", count: 60)
        let result = HMSResult(
            HTTPResponse(
                status: 200, headers: [], body: Array(refused("80300007", "tokenFormatError", token: token).utf8)))
        guard case .tokenInvalid(let reason, _) = result.harmonyOutcome(token: token, credentialsProven: true) else {
            Issue.record("not token_invalid")
            return
        }
        #expect(!reason.contains(token.prefix(20)))
        // Nor does Push Kit's own words, whatever the code.
        let worded = HMSResult(
            HTTPResponse(status: 400, headers: [], body: Array(answer("80100003", "bad payload for \(token)").utf8)))
        guard case .permanentFailure(let words) = worded.harmonyOutcome(token: token, credentialsProven: true) else {
            Issue.record("not failed")
            return
        }
        #expect(words.contains("bad payload for") && !words.contains(token.prefix(20)), "\(words)")
    }
}
