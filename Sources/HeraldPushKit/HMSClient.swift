import Foundation
import HeraldCore
import HeraldHTTP
import Logging
import Synchronization

extension ConfigurationScope {
    /// An app's Huawei Push Kit credentials (`herald.app_hms`).
    public static let hms: Self = "hms"
}

/// Sends data messages to Android phones with HMS Core through Huawei Push Kit's server API
/// (`POST /v1/{client id}/messages:send`), one token a request, as the app's OAuth 2.0 client
/// (client credentials, from `oauth-login.cloud.huawei.com`), and reads each answer's result
/// code into a typed outcome (``HMSResult``). A refused access token (80200001, 80200003) is
/// fetched again and the message sent once more.
public struct HMSClient: Sendable {
    public static let pushEndpoint = "https://push-api.cloud.huawei.com"
    public static let tokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"

    let clientID: String
    let tokens: AccessTokens
    let http: HTTPClient
    let sendURL: String
    let logger: Logger

    /// A client for the app `clientID`; `endpoint`, a stand-in's base URL, serves both the send
    /// and the token requests (nil: Huawei's).
    public init(clientID: String, clientSecret: String, endpoint: String?, http: HTTPClient, logger: Logger) {
        self.clientID = clientID
        self.http = http
        self.logger = logger
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        sendURL = "\(base ?? Self.pushEndpoint)/v1/\(clientID)/messages:send"
        let tokenURL = base.map { $0 + "/oauth2/v3/token" } ?? Self.tokenURL
        let form = formEncoded([
            ("grant_type", "client_credentials"), ("client_id", clientID), ("client_secret", clientSecret),
        ])
        tokens = AccessTokens(name: "Huawei app \(clientID)", logger: logger) { () async throws(AccessTokenError) in
            try await AccessTokens.post(
                form: form, to: tokenURL, http: http, refusing: "Huawei's token endpoint refused app \(clientID)")
        }
    }

    /// What these credentials have shown so far: whether Push Kit accepted a send made with them
    /// (until then, 80300007 may mean they are another app's), and whether it refused them
    /// urgent messages (80300011: a right Huawei grants per app), so that they are sent NORMAL.
    final class Memory: Sendable {
        private let state = Mutex((accepted: false, urgentRefused: false))
        var accepted: Bool { state.withLock { $0.accepted } }
        var urgentRefused: Bool { state.withLock { $0.urgentRefused } }
        func noteAccepted() { state.withLock { $0.accepted = true } }
        /// Whether this is the first refusal.
        func noteUrgentRefused() -> Bool {
            state.withLock { state in
                defer { state.urgentRefused = true }
                return !state.urgentRefused
            }
        }
    }
    let memory = Memory()

    /// Whether Push Kit has accepted a send made with these credentials, as far as this client
    /// knows; ``noteCredentialsAccepted()`` tells it of one it did not see (another daemon's).
    public var credentialsAccepted: Bool { memory.accepted }
    public func noteCredentialsAccepted() { memory.noteAccepted() }

    /// Sends each message (a request each, at once); the outcomes come in the same order.
    /// `validateOnly` asks Push Kit to check them without delivering (a dry run). A message
    /// refused for its urgency (80300011) is sent again as NORMAL, and so is every message after.
    public func send(_ messages: [HMSMessage], validateOnly: Bool) async -> [PushOutcome] {
        var messages = messages
        if memory.urgentRefused { for index in messages.indices { messages[index].urgent = false } }
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var codes = [String?](repeating: nil, count: messages.count)
        var pending = Array(messages.indices)
        var tokenRefreshed = false
        for _ in 0..<3 where !pending.isEmpty {
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
                pending = []
                break
            } catch {
                pending.forEach { outcomes[$0] = .retry(after: nil, reason: "\(error)") }
                pending = []
                break
            }
            let headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json;charset=UTF-8")]
            let answers = await http.send(
                pending.map {
                    HTTPRequest(
                        url: sendURL, headers: headers, body: messages[$0].requestBody(validateOnly: validateOnly),
                        timeout: .seconds(10))
                })
            var again: [Int] = []
            var tokenRefused = false
            for (index, answer) in zip(pending, answers) {
                switch answer {
                case .failure(let error) where error.kind == .invalidRequest:
                    outcomes[index] = .permanentFailure(reason: error.reason(sendingTo: "Huawei Push Kit"))
                case .failure(let error):
                    outcomes[index] = .retry(after: nil, reason: error.reason(sendingTo: "Huawei Push Kit"))
                case .success(let response):
                    let result = HMSResult(response)
                    if result.accessTokenRefused && !tokenRefreshed {
                        tokenRefused = true
                        again.append(index)
                    } else if result.code == HMSResult.noUrgentRight && messages[index].urgent {
                        if memory.noteUrgentRefused() {
                            logger.notice(
                                "Huawei Push Kit refuses this app urgent (HIGH) messages: they go as NORMAL (the right is applied for in AppGallery Connect)",
                                metadata: ["client_id": "\(clientID)"])
                        }
                        messages[index].urgent = false
                        again.append(index)
                    } else {
                        outcomes[index] = result.outcome(token: messages[index].token)
                        codes[index] = result.code
                    }
                }
            }
            if tokenRefused {
                await tokens.rejected(token)
                tokenRefreshed = true
            }
            pending = again
        }
        for index in pending { outcomes[index] = .retry(after: nil, reason: "Huawei Push Kit refused it three times") }
        if codes.contains(HMSResult.success) { memory.noteAccepted() }
        guard !memory.accepted else { return outcomes.map { $0! } }
        return zip(outcomes, codes).map { outcome, code in
            code == HMSResult.allTokensInvalid ? Self.unprovenCredentials : outcome!
        }
    }

    /// Push Kit answers 80300007 (all tokens invalid) also when the tokens are another app's than
    /// the credentials' (the app's row names another app's client id): until a send with these
    /// credentials has been accepted, it is their problem, and no phone is disabled for it.
    public static let unprovenCredentials = PushOutcome.configurationError(
        reason: "Huawei Push Kit answered 80300007 (all tokens invalid), and no send with these credentials has been"
            + " accepted yet: are herald.app_hms.client_id and its secret this app's?",
        scope: .hms)
}

/// One data message to one token, as Push Kit's v1 API takes it: `message.data` is a string
/// (the JSON object the app reads in `onMessageReceived`), `android` says its urgency, its TTL
/// and `collapse_key: -1` (every message kept while the phone is offline, up to Push Kit's
/// cache, never only the newest).
public struct HMSMessage: Sendable {
    public var token: String
    /// Herald's keys and the producer's, as strings.
    public var data: [(String, String)]
    public var urgent: Bool
    /// Seconds; Push Kit keeps a message at most 15 days.
    public var ttl: Int
    /// The delivery's tag (`bi_tag`), which the message's receipt gives back.
    public var receiptTag: String?
    /// The receipt configuration its receipt goes by (`receipt_id`); nil: the app's default.
    public var receiptID: String?

    public static let longestTTL = 15 * 86_400

    public init(
        token: String, data: [(String, String)], urgent: Bool, ttl: Int, receiptTag: String? = nil,
        receiptID: String? = nil
    ) {
        self.token = token
        self.data = data
        self.urgent = urgent
        self.ttl = ttl
        self.receiptTag = receiptTag
        self.receiptID = receiptID
    }

    public func requestBody(validateOnly: Bool) -> [UInt8] {
        let document = JSONValue.object(data.map { ($0.0, .string($0.1)) })
        let message = JSONValue.object([
            ("validate_only", .bool(validateOnly)),
            (
                "message",
                .object([
                    ("data", .string(String(decoding: document.encodedBytes, as: UTF8.self))),
                    (
                        "android",
                        .object(
                            [
                                ("collapse_key", .int(-1)), ("urgency", .string(urgent ? "HIGH" : "NORMAL")),
                                ("ttl", .string("\(min(max(ttl, 0), Self.longestTTL))s")),
                            ] + (receiptTag.map { [("bi_tag", .string($0))] } ?? [])
                                + (receiptID.map { [("receipt_id", .string($0))] } ?? []))
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
public struct HMSResult: Sendable {
    public var status: Int
    public var code: String?
    /// `msg`, whole (a partial success's lists the refused tokens).
    public var fullMessage: String
    public var requestID: String?
    public var retryAfter: Duration?

    public init(_ response: HTTPResponse) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        code = object?["code"].map { "\($0)" }
        // `msg` is a string (holding JSON, for refused tokens); an object is kept as its JSON.
        fullMessage =
            switch object?["msg"] {
            case let text as String: text
            case let value? where JSONSerialization.isValidJSONObject(value):
                String(decoding: (try? JSONSerialization.data(withJSONObject: value)) ?? Data(), as: UTF8.self)
            case let value?: "\(value)"
            case nil: String(decoding: response.body, as: UTF8.self)
            }
        requestID = object?["requestId"] as? String
        retryAfter = response.retryAfter(now: Date())
    }

    /// Push Kit's words as a reason may carry them about the message sent to `token`: at most
    /// 300 characters, without the token (a refusal lists the tokens it refused).
    public func message(without token: String) -> String {
        String((token.isEmpty ? fullMessage : fullMessage.replacingOccurrences(of: token, with: "…")).prefix(300))
    }

    public static let success = "80000000"
    public static let allTokensInvalid = "80300007"
    public static let noUrgentRight = "80300011"

    /// Why a refusal (80100000, 80300007) refused `token`, if it lists it: its `msg` is JSON
    /// listing the refused tokens, as `illegal_tokens` (the v1 API: the reason is that key), or
    /// under their reasons in `illegalTokens` (the HarmonyOS API).
    public func refusal(of token: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(fullMessage.utf8)) as? [String: Any] else {
            return nil
        }
        if let listed = object["illegal_tokens"] as? [String], listed.contains(token) { return "illegal_tokens" }
        let grouped = object["illegalTokens"] as? [String: Any] ?? [:]
        return grouped.first { ($0.value as? [String])?.contains(token) == true }?.key
    }

    /// 80200001 (authentication failed) or 80200003 (the access token expired): worth one more
    /// try with a fresh token.
    public var accessTokenRefused: Bool { code == "80200001" || code == "80200003" }

    /// What it means for the message sent to `token` (Huawei's result codes, in
    /// docs/architecture.md's table of answers).
    public func outcome(token: String) -> PushOutcome {
        let words = "Huawei Push Kit \(code ?? "HTTP \(status)"): \(message(without: token))"
        switch code {
        case Self.success:
            return .sent(messageName: requestID ?? "")
        case "80100000":
            // Some tokens refused: with one token a request, it is this one if it is listed.
            return refusal(of: token) != nil
                ? .tokenInvalid(reason: "Huawei Push Kit 80100000: the token is refused")
                : .sent(messageName: requestID ?? "")
        case Self.allTokensInvalid:
            return .tokenInvalid(reason: "Huawei Push Kit 80300007: all the tokens are invalid")
        case "80200001", "80200003", "80300002", Self.noUrgentRight:
            // Credentials refused; the app may not send (Push Kit not enabled, another app's
            // project); the app may not send urgent messages.
            return .configurationError(reason: words, scope: .hms)
        case "80100017", "80600003", "81000001":
            return .retry(after: retryAfter, reason: words)
        case let code? where code.hasPrefix("82"):
            // The app's topic, group or data-location setup.
            return .configurationError(reason: words, scope: .hms)
        case nil where status == 503:
            // Traffic control: the app sends faster than its quota; not the message's fault.
            return .overQuota(after: retryAfter ?? Self.trafficControlPause, reason: words + " (traffic control)")
        case nil where status == 200:
            return .retry(after: nil, reason: "Huawei Push Kit answered 200 without a result code")
        case nil where status == 404:
            return .configurationError(
                reason: "Huawei Push Kit answered 404: the send URL is wrong (HERALD_PROVIDER_ENDPOINTS?)", scope: .hms)
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
    public static let trafficControlPause: Duration = .seconds(30)

}
