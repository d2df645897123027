import Foundation
import HeraldCore
import HeraldHTTP
import Testing

@testable import HeraldPushKit
@testable import HeraldWorkers

/// Each of Huawei Push Kit's documented result codes comes to its outcome (docs/architecture.md,
/// "Huawei Push Kit"), read from the JSON answer whatever its HTTP status.
@Suite struct HMSResultTests {
    func kind(_ status: Int, _ body: String, token: String = "token-1", headers: [(String, String)] = []) -> OutcomeKind
    {
        let result = HMSResult(HTTPResponse(status: status, headers: headers, body: Array(body.utf8)))
        return OutcomeKind(result.outcome(token: token), scope: .hms)
    }

    func answer(_ code: String, _ msg: String = "words") -> String {
        #"{"code":"\#(code)","msg":"\#(msg)","requestId":"1573"}"#
    }

    @Test func everyDocumentedCodeComesToItsOutcome() {
        #expect(kind(200, answer("80000000", "Success")) == .sent)
        #expect(kind(200, answer("80300007", "All the tokens are invalid")) == .tokenInvalid)
        // Partial success lists the refused tokens in `msg`: this token, or another.
        let partial = answer("80100000", #"{\"success\":1,\"failure\":1,\"illegal_tokens\":[\"token-1\"]}"#)
        #expect(kind(200, partial) == .tokenInvalid)
        #expect(kind(200, partial, token: "token-2") == .sent)
        for code in ["80200001", "80200003", "80300002", "80300011", "82000001"] {
            #expect(kind(200, answer(code)) == .configuration, "\(code)")
        }
        for code in ["80100017", "80600003", "81000001"] {
            #expect(kind(500, answer(code)) == .retry, "\(code)")
        }
        for code in ["80100001", "80100002", "80100003", "80100004", "80100013", "80100016", "80300008", "80300010"] {
            #expect(kind(400, answer(code)) == .failed, "\(code)")
        }
        // Without a code: traffic control waits, other server errors retry, a 401 is the app's.
        #expect(kind(503, "traffic control") == .overQuota)
        #expect(kind(502, "<html>bad gateway</html>") == .retry)
        #expect(kind(401, "") == .configuration)
        #expect(kind(404, "not found") == .configuration, "the send URL is wrong")
        #expect(kind(200, "{}") == .retry, "an answer without a result code")
    }

    @Test func trafficControlWaitsAsLongAsPushKitAsks() {
        let asked = HMSResult(HTTPResponse(status: 503, headers: [("Retry-After", "7")], body: []))
        #expect(asked.outcome(token: "t") == .overQuota(after: .seconds(7), reason: asked.outcome(token: "t").reason))
        let silent = HMSResult(HTTPResponse(status: 503, body: []))
        guard case .overQuota(let after, _) = silent.outcome(token: "t") else { Issue.record("not paused"); return }
        #expect(after == HMSResult.trafficControlPause)
    }

    @Test func theRequestIsWhatPushKitDocuments() throws {
        let message = HMSMessage(
            token: "tok", data: [("title", "Hi"), ("order", "42")], urgent: false, ttl: 99_999_999)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(message.requestBody(validateOnly: true))) as? [String: Any])
        #expect(object["validate_only"] as? Bool == true)
        let body = try #require(object["message"] as? [String: Any])
        #expect(body["token"] as? [String] == ["tok"])
        let data = try #require(body["data"] as? String)
        #expect(
            try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: String] == [
                "title": "Hi", "order": "42",
            ])
        let android = try #require(body["android"] as? [String: Any])
        #expect(android["urgency"] as? String == "NORMAL")
        #expect(android["ttl"] as? String == "1296000s", "capped at 15 days")
        #expect(android["collapse_key"] as? Int == -1)
    }
}

extension PushOutcome {
    fileprivate var reason: String {
        switch self {
        case .retry(_, let reason), .overQuota(_, let reason), .configurationError(let reason, _),
            .permanentFailure(let reason), .tokenInvalid(let reason, _):
            reason
        case .sent: ""
        }
    }
}

extension HMSResultTests {
    /// A partial success's `msg` lists the refused tokens: this token is refused only when it is
    /// listed exactly, and the reason never carries a token.
    @Test func aPartialSuccessRefusesOnlyTheTokensItLists() {
        let listed = #"{\"success\":1,\"failure\":1,\"illegal_tokens\":[\"tok-1\/x\"]}"#
        let result = HMSResult(
            HTTPResponse(status: 200, body: Array(#"{"code":"80100000","msg":"\#(listed)","requestId":"9"}"#.utf8)))
        guard case .tokenInvalid(let reason, _) = result.outcome(token: "tok-1/x") else {
            Issue.record("\(result.outcome(token: "tok-1/x"))")
            return
        }
        #expect(!reason.contains("tok-1"), "\(reason)")
        #expect(result.outcome(token: "tok-1") == .sent(messageName: "9"), "a prefix is not the token")
        let grouped = #"{\"failure\":1,\"illegalTokens\":{\"tokenFormatError\":[\"tok-2\"]}}"#
        let harmony = HMSResult(
            HTTPResponse(status: 200, body: Array(#"{"code":"80100000","msg":"\#(grouped)","requestId":"9"}"#.utf8)))
        #expect(harmony.refusal(of: "tok-2") == "tokenFormatError" && harmony.refusal(of: "tok-3") == nil)
        // A `msg` that is an object rather than a string of JSON is read the same.
        let object = HMSResult(
            HTTPResponse(
                status: 200,
                body: Array(
                    #"{"code":"80300007","msg":{"illegalTokens":{"noRight":["tok-4"]}},"requestId":"9"}"#.utf8)))
        #expect(object.refusal(of: "tok-4") == "noRight")
    }
}
