import Foundation
import HeraldCore
import HeraldHTTP
import Logging

extension ConfigurationScope {
    /// An app's Honor Push setup (`herald.app_honor`).
    static let honor: Self = "honor"
}

/// Sends messages to Honor's phones (Magic UI) through Honor Push's server API
/// (`POST push-api.cloud.honor.com/api/v1/{app id}/sendMessage`, one token a request, JSON, a
/// `timestamp` header), as the app's OAuth 2.0 client (client credentials, from
/// `iam.developer.honor.com/auth/token`), and reads each answer into a typed outcome
/// (``HonorResult``). A refused access token is fetched again and the message sent once more.
/// It knows no database.
struct HonorPushClient: Sendable {
    static let pushEndpoint = "https://push-api.cloud.honor.com"
    static let tokenURL = "https://iam.developer.honor.com/auth/token"

    let tokens: AccessTokens
    let http: HTTPClient
    let sendURL: String

    /// `endpoint`, a stand-in's base URL, serves both the send and the token requests.
    init(appID: String, clientID: String, clientSecret: String, endpoint: String?, http: HTTPClient, logger: Logger) {
        self.http = http
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        sendURL = "\(base ?? Self.pushEndpoint)/api/v1/\(appID)/sendMessage"
        let tokenURL = base.map { $0 + "/auth/token" } ?? Self.tokenURL
        let form = formEncoded([
            ("grant_type", "client_credentials"), ("client_id", clientID), ("client_secret", clientSecret),
        ])
        tokens = AccessTokens(name: "Honor app \(appID)", logger: logger) { () async throws(AccessTokenError) in
            try await AccessTokens.post(
                form: form, to: tokenURL, http: http, refusing: "Honor's token endpoint refused client \(clientID)")
        }
    }

    /// Sends each message (a request each, at once); the answers come in the same order, each
    /// read as the outcome for its token.
    func send(_ messages: [HonorMessage]) async -> [HonorResult] {
        await tokens.sending(messages.count, noToken: HonorResult.init(tokenError:), refused: \.accessTokenRefused) {
            token, indices in
            let headers = [
                ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json;charset=UTF-8"),
                ("timestamp", "\(Int64(Date().timeIntervalSince1970 * 1000))"),
            ]
            let answers = await http.send(
                indices.map {
                    HTTPRequest(url: sendURL, headers: headers, body: messages[$0].requestBody, timeout: .seconds(10))
                })
            return zip(indices, answers).map { index, answer in
                switch answer {
                case .success(let response): HonorResult(response, token: messages[index].token)
                case .failure(let error): HonorResult(failure: error)
                }
            }
        }
    }
}

/// One message to one token, as Honor Push takes it. A notification is one the phone shows
/// (`android.notification`: `title`, `body`, what a tap does, its `importance`, NORMAL for a
/// service message and LOW for marketing, and a `notifyId` from the notification's id); a
/// silent one, or one with only data, is a pass-through message (`data` alone), handed to the
/// app's `HonorMessageService`. Either carries Herald's keys and the producer's data as `data`, a
/// JSON object in a string.
struct HonorMessage: Sendable {
    var token: String
    var data: String
    /// Nil: a pass-through message.
    var shown: (title: String, body: String, tap: PayloadBuilder.Tap, service: Bool, notifyID: Int)?
    /// Seconds; Honor Push keeps a message at most 15 days.
    var ttl: Int

    static let longestTTL = 15 * 86_400

    var requestBody: [UInt8] {
        var android: [(String, JSONValue)] = [
            ("ttl", .string("\(min(max(ttl, 0), Self.longestTTL))s")), ("targetUserType", .int(0)),
        ]
        if let shown {
            let click: [(String, JSONValue)] =
                switch shown.tap {
                case .openApp: [("type", .int(3))]
                case .openIntent(let uri): [("type", .int(1)), ("intent", .string(uri))]
                case .openWeb(let url): [("type", .int(2)), ("url", .string(url))]
                }
            android.append(
                (
                    "notification",
                    .object([
                        ("title", .string(shown.title)), ("body", .string(shown.body)), ("clickAction", .object(click)),
                        ("importance", .string(shown.service ? "NORMAL" : "LOW")), ("notifyId", .int(shown.notifyID)),
                    ])
                ))
        }
        return JSONValue.object([
            ("data", .string(data)), ("android", .object(android)), ("token", .array([.string(token)])),
        ])
        .encodedBytes
    }
}

/// Honor Push's answer to one send: `{code, message, data: {sendResult, requestId, failTokens,
/// expireTokens}}`, read whatever the HTTP status; or why there was none.
struct HonorResult: Sendable {
    var status: Int?
    var code: Int?
    var sendResult: Bool?
    var requestID: String?
    /// Whether the answer lists the token among those expired (the app was uninstalled, the token
    /// replaced) or those it could not send to.
    var tokenExpired = false
    var tokenFailed = false
    /// The answer's words, at most 300 characters, without the token.
    var words: String
    var retryAfter: Duration?
    var tokenError: AccessTokenError?

    init(_ response: HTTPResponse, token: String) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        code = (object?["code"] as? NSNumber)?.intValue ?? (object?["code"] as? String).flatMap { Int($0) }
        let data = object?["data"] as? [String: Any]
        sendResult = data?["sendResult"] as? Bool
        requestID = data?["requestId"] as? String
        tokenExpired = (data?["expireTokens"] as? [String])?.contains(token) == true
        tokenFailed = (data?["failTokens"] as? [String])?.contains(token) == true
        let text = object?["message"] as? String ?? String(decoding: response.body.prefix(300), as: UTF8.self)
        words = String((token.isEmpty ? text : text.replacingOccurrences(of: token, with: "…")).prefix(300))
        retryAfter = response.retryAfter(now: Date())
    }

    init(failure: HTTPClientError) {
        words = failure.reason(sendingTo: "Honor Push")
        status = failure.kind == .invalidRequest ? 400 : nil
    }

    init(tokenError: AccessTokenError) {
        self.tokenError = tokenError
        words = tokenError.description
    }

    /// The access token refused or expired (HTTP 401, or Huawei's lineage of codes that Honor's
    /// API kept: 80200001, 80200003): worth one more try with a fresh one.
    var accessTokenRefused: Bool { status == 401 || code == 80_200_001 || code == 80_200_003 }

    /// Honor documents 200 in `code` for a send it took; 0 and 80000000 are taken as success too,
    /// since its error table is not published and its API descends from Huawei's.
    static let successCodes: Set<Int> = [200, 0, 80_000_000]
    /// All the tokens are invalid (Huawei's lineage; Honor's own table is not published).
    static let allTokensInvalid = 80_300_007

    /// What it means for the message (docs/architecture.md's table of answers).
    var outcome: PushOutcome {
        if let tokenError { return tokenError.outcome(scope: .honor) }
        let reason = "Honor Push \(code.map { "\($0)" } ?? status.map { "HTTP \($0)" } ?? ""): \(words)"
        if tokenExpired { return .tokenInvalid(reason: "Honor Push listed the token in expireTokens") }
        switch (status, code) {
        case (200?, let code?) where Self.successCodes.contains(code):
            if tokenFailed || sendResult == false {
                return .permanentFailure(reason: "Honor Push could not send it to this token (failTokens): \(words)")
            }
            return .sent(messageName: requestID ?? "")
        case (_, Self.allTokensInvalid?):
            return .tokenInvalid(reason: "Honor Push \(Self.allTokensInvalid): all the tokens are invalid")
        case (_, 80_200_001?), (_, 80_200_003?), (_, 80_300_002?), (401?, _), (403?, _):
            return .configurationError(reason: reason, scope: .honor)
        case (404?, _):
            return .configurationError(
                reason: "Honor Push answered 404: the send URL is wrong (the app id? HERALD_PROVIDER_ENDPOINTS?)",
                scope: .honor)
        case (429?, _), (503?, _):
            // The app's rate (3000 a second, Honor's only documented limit), not this message.
            return .overQuota(after: retryAfter ?? .seconds(1), reason: reason + " (the app's rate)")
        case (let status?, _) where status >= 500:
            return .retry(after: retryAfter, reason: reason)
        case (_, 81_000_001?), (nil, _), (200?, nil):
            return .retry(after: retryAfter, reason: reason)
        default:
            // 80100003 structure, 80300008 size, a 400: this message, for good.
            return .permanentFailure(reason: reason)
        }
    }
}
