import Foundation

/// A message Honor Push's stand-in accepted.
public struct ReceivedHonorMessage: Sendable {
    /// The app id, from the request's path.
    public var appID: String
    public var token: String
    /// The request's body as JSON text.
    public var json: String
    public var requestID: String

    /// The request's body, parsed.
    public var body: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    /// `android.notification`, nil for a pass-through message.
    public var notification: [String: Any]? { (body["android"] as? [String: Any])?["notification"] as? [String: Any] }

    /// `data`: a JSON object in a string, as the app's `HonorMessageService` reads it.
    public var data: [String: String] {
        guard let text = body["data"] as? String else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]) ?? [:]
    }
}

/// A stand-in for Honor Push's server API and its OAuth 2.0 token endpoint. Honor's own pages
/// (developer.honor.com, "下行消息" and "获取鉴权接口") were read through Honor's reposts of its
/// send guide and the SDKs that copy its field reference; its table of result codes is not
/// published, so the codes are Huawei Push Kit's, from which Honor's API descends:
///
/// - `POST /auth/token` takes `grant_type=client_credentials` with a registered app's `client_id`
///   and `client_secret`, and answers `{access_token, expires_in, token_type}`, or OAuth's
///   `{"error": "unauthorized_client", …}`.
/// - `POST /api/v1/{app id}/sendMessage` checks the bearer token (401; 80200003 once expired),
///   a `timestamp` header in milliseconds, and the body: only Honor's members, `data` a string,
///   1 to 1000 `token`s, `android.ttl` as seconds up to 15 days, `targetUserType` 0 or 1, and a
///   notification's `title` and `body` (not empty), its `clickAction` (required: type 1 with an
///   `intent` or `action`, 2 with an https `url`, 3), `importance` NORMAL or LOW, a `notifyId`
///   that is an integer; at most 4096 bytes (80300008; Honor's limit is not published: Huawei's).
///   It answers `{code: 200, message, data: {sendResult, requestId, failTokens, expireTokens}}`,
///   or the error injected for the token (``EmulatorBehaviour``).
actor HonorService {
    private var apps: [String: (appID: String, secret: String)] = [:]
    private var accessTokens: [String: (clientID: String, expires: Date)] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedHonorMessage] = []
    private(set) var tokenRequests = 0
    private var nextRequestID = 1

    /// Trusts `clientID` and its secret, for the app `appID`.
    func registerApp(appID: String, clientID: String, secret: String) { apps[clientID] = (appID, secret) }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func expireAccessTokens() {
        for token in accessTokens.keys { accessTokens[token]?.expires = .distantPast }
    }

    func issueToken(form: Data) -> (Int, String) {
        tokenRequests += 1
        let fields = XiaomiService.form(form) ?? [:]
        guard fields["grant_type"] == "client_credentials" else {
            return (
                400, #"{"error":"unsupported_grant_type","error_description":"grant_type is not client_credentials"}"#
            )
        }
        guard let clientID = fields["client_id"], let app = apps[clientID], fields["client_secret"] == app.secret else {
            return (
                401,
                #"{"error":"unauthorized_client","error_description":"Invalid client or Invalid client credentials"}"#
            )
        }
        let token = "honor-" + UUID().uuidString.lowercased()
        accessTokens[token] = (clientID, Date().addingTimeInterval(3600))
        return (200, #"{"access_token":"\#(token)","expires_in":3600,"token_type":"Bearer"}"#)
    }

    func send(appID: String, headers: [String: String], body: Data) -> PushKitAnswer {
        guard let bearer = headers["authorization"], bearer.hasPrefix("Bearer "),
            let grant = accessTokens[String(bearer.dropFirst(7))], apps[grant.clientID]?.appID == appID
        else { return Self.answer(401, 80_200_001, "Authentication Error") }
        guard grant.expires > Date() else { return Self.answer(401, 80_200_003, "OAuth token expired") }
        guard let timestamp = headers["timestamp"].flatMap(Int64.init), timestamp > 1_000_000_000_000 else {
            return Self.answer(400, 80_100_001, "Parameters check error: the timestamp header is milliseconds")
        }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return Self.answer(400, 80_100_003, "Message structure error")
        }
        if let problem = Self.problem(in: object, size: body.count) {
            return Self.answer(400, problem.code, problem.words)
        }
        let token = (object["token"] as? [String])?.first ?? ""
        var delay: Duration?
        if let entry = behaviours[token] {
            if let remaining = entry.remaining {
                behaviours[token] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
            }
            switch entry.behaviour {
            case .slow(let milliseconds): delay = .milliseconds(milliseconds)
            case .unregistered, .unregisteredSince, .gone:
                return PushKitAnswer(status: 200, json: Self.result(requestID: "0", expired: [token], failed: []))
            case .invalidToken: return Self.answer(200, 80_300_007, "All the tokens are invalid")
            case .senderIDMismatch, .thirdPartyAuthError:
                return Self.answer(403, 80_300_002, "The current app does not have the permission to send messages")
            case .expiredProviderToken: return Self.answer(401, 80_200_003, "OAuth token expired")
            case .quotaExceeded(let retryAfter), .unavailable(let retryAfter):
                var answer = Self.answer(429, 80_100_017, "flow control")
                answer.retryAfter = retryAfter
                return answer
            case .internalError: return Self.answer(500, 81_000_001, "System inner error")
            case .invalidMessage, .payloadTooLarge:
                return Self.answer(400, 80_300_008, "The message body size exceeds the default value")
            case .garbledAnswer: return Self.answer(400, 80_100_003, "Illegal \u{0}payload\u{7}\u{1B}[31m")
            }
        }
        let requestID = "\(Int64(Date().timeIntervalSince1970 * 1000))" + String(format: "%05ld", nextRequestID)
        nextRequestID += 1
        received.append(
            ReceivedHonorMessage(
                appID: appID, token: token, json: String(decoding: body, as: UTF8.self), requestID: requestID))
        return PushKitAnswer(
            status: 200, json: Self.result(requestID: requestID, expired: [], failed: []), delay: delay)
    }

    static func result(requestID: String, expired: [String], failed: [String]) -> String {
        let list = { (tokens: [String]) in "[" + tokens.map(EmulatorRouter.quote).joined(separator: ",") + "]" }
        return
            #"{"code":200,"message":"success","data":{"sendResult":\#(expired.isEmpty && failed.isEmpty),"requestId":"\#(requestID)","failTokens":\#(list(failed)),"expireTokens":\#(list(expired))}}"#
    }

    static func answer(_ status: Int, _ code: Int, _ words: String) -> PushKitAnswer {
        PushKitAnswer(status: status, json: #"{"code":\#(code),"message":\#(EmulatorRouter.quote(words))}"#)
    }

    /// What Honor Push refuses in a message, with its code.
    static func problem(in object: [String: Any], size: Int) -> (code: Int, words: String)? {
        if let unknown = Set(object.keys).subtracting(["data", "notification", "android", "token"]).first {
            return (80_100_001, "Parameters check error: unknown member \(unknown)")
        }
        if let data = object["data"], !(data is String) { return (80_100_003, "data must be a string") }
        guard let tokens = object["token"] as? [String], (1...1000).contains(tokens.count) else {
            return (80_300_010, "The number of tokens is 1 to 1000")
        }
        if let android = object["android"] {
            guard let android = android as? [String: Any] else { return (80_100_003, "android must be an object") }
            let members: Set<String> = ["ttl", "biTag", "targetUserType", "data", "notification"]
            if let unknown = Set(android.keys).subtracting(members).first {
                return (80_100_001, "Parameters check error: unknown member android.\(unknown)")
            }
            if let ttl = android["ttl"] {
                guard let ttl = ttl as? String, ttl.hasSuffix("s"), let seconds = Int(ttl.dropLast()), seconds >= 0
                else {
                    return (80_100_001, "ttl is seconds, such as \"86400s\"")
                }
                if seconds > 15 * 86_400 { return (80_100_004, "TTL is longer than 15 days") }
            }
            if let type = android["targetUserType"], ![0, 1].contains(type as? Int ?? -1) {
                return (80_100_001, "targetUserType is 0 or 1")
            }
            if let notification = android["notification"] {
                guard let notification = notification as? [String: Any] else {
                    return (80_100_003, "android.notification must be an object")
                }
                if let problem = Self.problem(inNotification: notification) { return problem }
            }
        }
        if size > 4096 { return (80_300_008, "The message body size exceeds the default value (4096 bytes)") }
        return nil
    }

    static func problem(inNotification notification: [String: Any]) -> (code: Int, words: String)? {
        let members: Set<String> = [
            "title", "body", "image", "clickAction", "importance", "style", "bigTitle", "bigBody", "when", "buttons",
            "badge", "notifyId", "tag", "group",
        ]
        if let unknown = Set(notification.keys).subtracting(members).first {
            return (80_100_001, "Parameters check error: unknown member android.notification.\(unknown)")
        }
        guard !(notification["title"] as? String ?? "").isEmpty, !(notification["body"] as? String ?? "").isEmpty
        else { return (80_100_001, "a notification's title and body are required") }
        guard let click = notification["clickAction"] as? [String: Any] else {
            return (80_100_001, "android.notification.clickAction is required")
        }
        switch click["type"] as? Int {
        case 1 where click["intent"] is String || click["action"] is String: break
        case 2 where (click["url"] as? String)?.hasPrefix("https://") == true: break
        case 3: break
        default:
            return (80_100_001, "clickAction.type is 1 with an intent or action, 2 with an https url, or 3")
        }
        if let importance = notification["importance"], !["NORMAL", "LOW"].contains(importance as? String ?? "") {
            return (80_100_001, "importance is NORMAL or LOW")
        }
        if let id = notification["notifyId"], !(id is Int) { return (80_100_001, "notifyId is an integer") }
        return nil
    }
}

extension HonorService: EmulatedService {
    /// Honor's token endpoint and sends, and what registers an app and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let honor = self
        router.add("POST /auth/token") { request in
            let (status, json) = await honor.issueToken(form: request.body)
            return EmulatorRouter.json(status, json)
        }
        router.add("POST /api/v1/*/sendMessage") { request in
            let answer = await honor.send(
                appID: String(request.path.split(separator: "/").dropFirst(2).first ?? ""), headers: request.headers,
                body: request.body)
            return try await EmulatorRouter.json(
                answer.status, answer.json, after: answer.delay, retryAfter: answer.retryAfter)
        }
        router.add("POST /emulator/honor-apps") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let appID = object["app_id"] as? String, let clientID = object["client_id"] as? String,
                let secret = object["client_secret"] as? String
            else {
                return EmulatorRouter.json(
                    400, #"{"error":"expected {\"app_id\": …, \"client_id\": …, \"client_secret\": …}"}"#)
            }
            await honor.registerApp(appID: appID, clientID: clientID, secret: secret)
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/honor") { _ in
            let list = await honor.received.map {
                "{\"app_id\":\(EmulatorRouter.quote($0.appID)),\"request_id\":\(EmulatorRouter.quote($0.requestID)),\"message\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}

extension Emulator {
    /// Trusts an Honor app's OAuth 2.0 client id and secret, for its app id.
    public func registerHonorApp(appID: String, clientID: String, secret: String) async {
        await routes.honor.registerApp(appID: appID, clientID: clientID, secret: secret)
    }

    /// The messages Honor Push's stand-in accepted, and the token requests it took.
    public var honorReceived: [ReceivedHonorMessage] { get async { await routes.honor.received } }
    public var honorTokenRequests: Int { get async { await routes.honor.tokenRequests } }

    /// Expires every Honor access token issued so far (the next send with one gets 80200003).
    public func expireHonorAccessTokens() async { await routes.honor.expireAccessTokens() }
}
