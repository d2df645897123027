import Foundation
import HeraldCore
import HeraldHTTP
import Logging

extension ConfigurationScope {
    /// An app's Huawei Push Kit credentials (`herald.app_hms`).
    static let hms: Self = "hms"
}

/// Sends data messages to Android phones with HMS Core through Huawei Push Kit's server API
/// (`POST /v1/{client id}/messages:send`), one token a request, as the app's OAuth 2.0 client
/// (client credentials, from `oauth-login.cloud.huawei.com`), and reads each answer's result
/// code into a typed outcome (``HMSResult``). A refused access token (80200001, 80200003) is
/// fetched again and the message sent once more.
struct HMSClient: Sendable {
    static let pushEndpoint = "https://push-api.cloud.huawei.com"
    static let tokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"

    let clientID: String
    let tokens: AccessTokens
    let http: HTTPClient
    let sendURL: String

    /// A client for the app `clientID`; `endpoint`, a stand-in's base URL, serves both the send
    /// and the token requests (nil: Huawei's).
    init(clientID: String, clientSecret: String, endpoint: String?, http: HTTPClient, logger: Logger) {
        self.clientID = clientID
        self.http = http
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        sendURL = "\(base ?? Self.pushEndpoint)/v1/\(clientID)/messages:send"
        let tokenURL = base.map { $0 + "/oauth2/v3/token" } ?? Self.tokenURL
        let form =
            "grant_type=client_credentials&client_id=\(Self.formEncoded(clientID))"
            + "&client_secret=\(Self.formEncoded(clientSecret))"
        tokens = AccessTokens(name: "Huawei app \(clientID)", logger: logger) { () async throws(AccessTokenError) in
            try await AccessTokens.post(
                form: form, to: tokenURL, http: http, refusing: "Huawei's token endpoint refused app \(clientID)")
        }
    }

    /// Sends each message (a request each, at once); the outcomes come in the same order.
    /// `validateOnly` asks Push Kit to check them without delivering (a dry run).
    func send(_ messages: [HMSMessage], validateOnly: Bool) async -> [PushOutcome] {
        let bodies = messages.map { $0.requestBody(validateOnly: validateOnly) }
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var pending = Array(messages.indices)
        for round in 0..<2 where !pending.isEmpty {
            let token: String
            do {
                token = try await tokens.token()
            } catch let error as AccessTokenError {
                let outcome: PushOutcome =
                    switch error {
                    case .configuration(let reason): .configurationError(reason: reason, scope: .hms)
                    case .unavailable(let reason): .retry(after: nil, reason: reason)
                    }
                pending.forEach { outcomes[$0] = outcome }
                break
            } catch {
                pending.forEach { outcomes[$0] = .retry(after: nil, reason: "\(error)") }
                break
            }
            let headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json;charset=UTF-8")]
            let answers = await http.send(
                pending.map { HTTPRequest(url: sendURL, headers: headers, body: bodies[$0], timeout: .seconds(10)) })
            var refused: [Int] = []
            for (index, answer) in zip(pending, answers) {
                switch answer {
                case .failure(let error) where error.kind == .invalidRequest:
                    outcomes[index] = .permanentFailure(reason: "Huawei Push Kit request not sent: \(error.message)")
                case .failure(let error):
                    outcomes[index] = .retry(after: nil, reason: "Huawei Push Kit unreachable: \(error.message)")
                case .success(let response):
                    let result = HMSResult(response)
                    if result.accessTokenRefused && round == 0 {
                        refused.append(index)
                    } else {
                        outcomes[index] = result.outcome(token: messages[index].token)
                    }
                }
            }
            if !refused.isEmpty { await tokens.rejected(token) }
            pending = refused
        }
        return outcomes.map { $0! }
    }

    /// `application/x-www-form-urlencoded`'s escaping of a value.
    static func formEncoded(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}

/// One data message to one token, as Push Kit's v1 API takes it: `message.data` is a string
/// (the JSON object the app reads in `onMessageReceived`), `android` says its urgency, its TTL
/// and `collapse_key: -1` (every message kept while the phone is offline, up to Push Kit's
/// cache, never only the newest).
struct HMSMessage: Sendable {
    var token: String
    /// Herald's keys and the producer's, as strings.
    var data: [(String, String)]
    var urgent: Bool
    /// Seconds; Push Kit keeps a message at most 15 days.
    var ttl: Int

    static let longestTTL = 15 * 86_400

    func requestBody(validateOnly: Bool) -> [UInt8] {
        let document = JSONValue.object(data.map { ($0.0, .string($0.1)) })
        let message = JSONValue.object([
            ("validate_only", .bool(validateOnly)),
            (
                "message",
                .object([
                    ("data", .string(String(decoding: document.encodedBytes, as: UTF8.self))),
                    (
                        "android",
                        .object([
                            ("collapse_key", .int(-1)), ("urgency", .string(urgent ? "HIGH" : "NORMAL")),
                            ("ttl", .string("\(min(max(ttl, 0), Self.longestTTL))s")),
                        ])
                    ),
                    ("token", .array([.string(token)])),
                ])
            ),
        ])
        return message.encodedBytes
    }
}

/// Push Kit's answer to one send: its result code (`code`, a string of digits, in a JSON body
/// whatever the HTTP status), its words (`msg`) and its `requestId`.
struct HMSResult: Sendable {
    var status: Int
    var code: String?
    var message: String
    var requestID: String?
    var retryAfter: Duration?

    init(_ response: HTTPResponse) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        code = object?["code"].map { "\($0)" }
        message = String((object?["msg"].map { "\($0)" } ?? String(decoding: response.body, as: UTF8.self)).prefix(300))
        requestID = object?["requestId"] as? String
        retryAfter = response.retryAfter(now: Date())
    }

    /// 80200001 (authentication failed) or 80200003 (the access token expired): worth one more
    /// try with a fresh token.
    var accessTokenRefused: Bool { code == "80200001" || code == "80200003" }

    /// What it means for the message sent to `token` (Huawei's result codes, in
    /// docs/architecture.md's table of answers).
    func outcome(token: String) -> PushOutcome {
        let words = "Huawei Push Kit \(code ?? "HTTP \(status)"): \(message)"
        switch code {
        case "80000000":
            return .sent(messageName: requestID ?? "")
        case "80100000":
            // Some tokens refused: with one token a request, it is this one if it is listed.
            return message.contains(token) ? .tokenInvalid(reason: words) : .sent(messageName: requestID ?? "")
        case "80300007":
            return .tokenInvalid(reason: words)
        case "80200001", "80200003", "80300002", "80300011":
            // Credentials refused; the app may not send (Push Kit not enabled, another app's
            // project); the app may not send urgent messages (a right to apply for).
            return .configurationError(reason: words, scope: .hms)
        case "80100017", "80600003", "81000001":
            return .retry(after: retryAfter, reason: words)
        case let code? where code.hasPrefix("82"):
            // The app's topic, group or data-location setup.
            return .configurationError(reason: words, scope: .hms)
        case nil where status == 503:
            // Traffic control: the app sends faster than its quota; not the message's fault.
            return .overQuota(after: retryAfter ?? Self.trafficControlPause, reason: words + " (traffic control)")
        case _ where status >= 500 || status == 429:
            return .retry(after: retryAfter, reason: words)
        case _ where status == 401:
            return .configurationError(reason: words, scope: .hms)
        default:
            // 80100001 parameters, 80100003 structure, 80100004 TTL, 80300008 size, …: this
            // message, for good.
            return .permanentFailure(reason: words)
        }
    }

    /// How long sends wait after traffic control when Push Kit says nothing of when to come back.
    static let trafficControlPause: Duration = .seconds(30)

}
