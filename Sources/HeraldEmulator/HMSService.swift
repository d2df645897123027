import Foundation

/// A message Huawei Push Kit's stand-in accepted.
public struct ReceivedHMSMessage: Sendable {
    /// The app's OAuth 2.0 client id, from the request's path.
    public var clientID: String
    public var token: String
    /// The `message` object as JSON text.
    public var json: String
    public var validateOnly: Bool
    public var requestID: String
    /// `android.bi_tag`, which the message's receipt gives back.
    public var receiptTag: String? { (message["android"] as? [String: Any])?["bi_tag"] as? String }

    /// The `message` object, parsed.
    public var message: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    /// A data message's `data`: a JSON object in a string, as the app's `onMessageReceived` reads it.
    public var data: [String: String] {
        guard let text = message["data"] as? String else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]) ?? [:]
    }
}

/// A stand-in for Huawei Push Kit's server API (v1, Android phones with HMS Core) and Huawei's
/// OAuth 2.0 token endpoint, strict about what Huawei documents:
///
/// - `POST /oauth2/v3/token` takes `grant_type=client_credentials` with a registered app's
///   `client_id` and `client_secret`, and answers `{access_token, expires_in, token_type}`, or
///   Huawei's error (`{"error": 1101, "sub_error": …}`).
/// - `POST /v1/{client id}/messages:send` checks the bearer token (80200001, or 80200003 when it
///   expired), refuses urgency HIGH to an app without Huawei's right to it (80300011), and the
///   message: only Push Kit's members, exactly one of `token`, `topic` or
///   `condition`, 1 to 1000 tokens (80300010), `data` a string (80100003), `android`'s
///   `collapse_key` in -1…100 (80100013), `urgency` HIGH or NORMAL and `ttl` as Huawei writes it
///   (80100001), at most 4096 bytes without the tokens (80300008). It answers `{code, msg,
///   requestId}`, or the error injected for the token (``EmulatorBehaviour``).
actor HMSService {

    /// Each app's client secret, and whether Huawei granted it urgent (HIGH) messages.
    private var apps: [String: (secret: String, urgent: Bool)] = [:]
    private var accessTokens: [String: (clientID: String, expires: Date)] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedHMSMessage] = []
    private(set) var tokenRequests = 0
    private var nextRequestID = 1

    func registerApp(clientID: String, secret: String, urgent: Bool) { apps[clientID] = (secret, urgent) }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    /// Every access token issued so far expires now: the next send with one gets 80200003.
    func expireAccessTokens() {
        for token in accessTokens.keys { accessTokens[token]?.expires = .distantPast }
    }

    func issueToken(form: String) -> (Int, String) {
        tokenRequests += 1
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        guard fields["grant_type"] == "client_credentials" else {
            return (
                400, #"{"error":1102,"sub_error":20001,"error_description":"grant_type is not client_credentials"}"#
            )
        }
        guard let clientID = fields["client_id"],
            clientID.range(of: "^[0-9]{1,64}$", options: .regularExpression) != nil
        else { return (400, #"{"error":1101,"sub_error":20002,"error_description":"invalid client_id"}"#) }
        guard let secret = apps[clientID]?.secret else {
            return (400, #"{"error":1101,"sub_error":20003,"error_description":"client_id does not exist"}"#)
        }
        guard fields["client_secret"] == secret else {
            return (400, #"{"error":1101,"sub_error":12304,"error_description":"client_secret is wrong"}"#)
        }
        let token = "hms-" + UUID().uuidString.lowercased()
        accessTokens[token] = (clientID, Date().addingTimeInterval(3600))
        return (200, #"{"access_token":"\#(token)","expires_in":3600,"token_type":"Bearer"}"#)
    }

    func send(clientID: String, authorization: String?, body: Data) -> PushKitAnswer {
        guard let bearer = authorization, bearer.hasPrefix("Bearer "),
            let grant = accessTokens[String(bearer.dropFirst(7))], grant.clientID == clientID
        else { return PushKitAnswer.result(401, "80200001", "Authentication Error") }
        guard grant.expires > Date() else { return PushKitAnswer.result(401, "80200003", "OAuth token expired") }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let message = object["message"] as? [String: Any]
        else { return PushKitAnswer.result(400, "80100003", "Message structure error: no message object") }
        if let problem = Self.problem(in: object, message: message, size: body.count) {
            return PushKitAnswer.result(400, problem.code, problem.words)
        }
        if (message["android"] as? [String: Any])?["urgency"] as? String == "HIGH", apps[clientID]?.urgent != true {
            return PushKitAnswer.result(200, "80300011", "No permission to send high-level notification messages")
        }
        let token = (message["token"] as? [String])?.first ?? ""
        let (injected, delay) = injected(for: token)
        if let injected { return injected }
        let requestID = "\(Int64(Date().timeIntervalSince1970 * 1000))" + String(format: "%05ld", nextRequestID)
        nextRequestID += 1
        let json = String(
            decoding: (try? JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])) ?? Data(),
            as: UTF8.self)
        received.append(
            ReceivedHMSMessage(
                clientID: clientID, token: token, json: json,
                validateOnly: object["validate_only"] as? Bool ?? false, requestID: requestID))
        return PushKitAnswer(
            status: 200, json: #"{"code":"80000000","msg":"Success","requestId":"\#(requestID)"}"#, delay: delay)
    }

    /// What Push Kit refuses in a message, with its result code.
    static func problem(in object: [String: Any], message: [String: Any], size: Int) -> (code: String, words: String)? {
        if let unknown = Set(object.keys).subtracting(["validate_only", "message"]).first {
            return ("80100001", "Parameters check error: unknown member \(unknown)")
        }
        let members: Set<String> = [
            "data", "notification", "android", "apns", "webpush", "token", "topic", "condition",
        ]
        if let unknown = Set(message.keys).subtracting(members).first {
            return ("80100001", "Parameters check error: unknown member message.\(unknown)")
        }
        guard ["token", "topic", "condition"].filter({ message[$0] != nil }).count == 1 else {
            return ("80100001", "Parameters check error: exactly one of token, topic and condition")
        }
        if let tokens = message["token"] {
            guard let tokens = tokens as? [String], (1...1000).contains(tokens.count) else {
                return ("80300010", "The number of tokens exceeds the default value: 1 to 1000")
            }
        }
        if let data = message["data"], !(data is String) {
            return ("80100003", "Illegal payload: message.data must be a string")
        }
        if let android = message["android"] {
            guard let android = android as? [String: Any] else {
                return ("80100003", "Message structure error: android")
            }
            let known: Set<String> = [
                "collapse_key", "urgency", "category", "ttl", "bi_tag", "fast_app_target", "data", "notification",
                "receipt_id",
            ]
            if let unknown = Set(android.keys).subtracting(known).first {
                return ("80100001", "Parameters check error: unknown member android.\(unknown)")
            }
            if let key = android["collapse_key"] {
                guard let key = key as? Int, (-1...100).contains(key) else {
                    return ("80100013", "collapse_key is illegal: an integer from -1 to 100")
                }
            }
            if let urgency = android["urgency"], !["HIGH", "NORMAL"].contains(urgency as? String ?? "") {
                return ("80100001", "Parameters check error: urgency is HIGH or NORMAL")
            }
            if let ttl = android["ttl"] {
                guard let ttl = ttl as? String,
                    ttl.range(of: #"^(\d+|\d+\.\d{1,9})[sS]?$"#, options: .regularExpression) != nil
                else { return ("80100001", "Parameters check error: ttl is seconds, such as \"86400s\"") }
                if Double(ttl.dropLast(ttl.last?.isLetter == true ? 1 : 0)) ?? 0 > 15 * 86_400 {
                    return ("80100004", "TTL is longer than 15 days")
                }
            }
        }
        let tokenBytes = ((message["token"] as? [String]) ?? []).reduce(0) { $0 + $1.utf8.count + 3 }
        if size - tokenBytes > 4096 {
            return ("80300008", "The message body size exceeds the default value (4096 bytes)")
        }
        return nil
    }

    /// The error injected for `token`, or how long to wait before answering as usual.
    private func injected(for token: String) -> (PushKitAnswer?, delay: Duration?) {
        guard let entry = behaviours[token] else { return (nil, nil) }
        if let remaining = entry.remaining {
            behaviours[token] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
        }
        let answer: PushKitAnswer
        switch entry.behaviour {
        case .unregistered, .unregisteredSince, .gone, .invalidToken:
            answer = PushKitAnswer.result(200, "80300007", "All the tokens are invalid")
        case .senderIDMismatch, .thirdPartyAuthError:
            answer = PushKitAnswer.result(
                200, "80300002", "The current app does not have the permission to send messages")
        case .expiredProviderToken:
            answer = PushKitAnswer.result(401, "80200003", "OAuth token expired")
        case .quotaExceeded(let retryAfter), .unavailable(let retryAfter):
            answer = PushKitAnswer(status: 503, json: "traffic control", retryAfter: retryAfter)
        case .internalError:
            answer = PushKitAnswer.result(500, "81000001", "System inner error")
        case .invalidMessage, .payloadTooLarge:
            answer = PushKitAnswer.result(400, "80100003", "Illegal payload")
        case .garbledAnswer:
            answer = PushKitAnswer.result(400, "80100003", "Illegal \u{0}payload\u{7}\u{1B}[31m")
        case .slow(let milliseconds):
            return (nil, .milliseconds(milliseconds))
        }
        return (answer, nil)
    }

}

/// An answer of Huawei Push Kit's server API (either version): `{code, msg, requestId}` with an
/// HTTP status, or whatever was injected.
struct PushKitAnswer {
    var status: Int
    var json: String
    var delay: Duration? = nil
    var retryAfter: Int? = nil

    static func result(_ status: Int, _ code: String, _ words: String) -> PushKitAnswer {
        let msg = String(decoding: (try? JSONSerialization.data(withJSONObject: [words])) ?? Data(), as: UTF8.self)
            .dropFirst().dropLast()
        return PushKitAnswer(status: status, json: #"{"code":"\#(code)","msg":\#(msg),"requestId":"0"}"#)
    }
}

extension HMSService: EmulatedService {
    /// Huawei's token endpoint and Push Kit's sends (before FCM's `/v1/projects/*`: client id `projects` is Huawei's),
    /// and what registers an app and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let hms = self
        router.add("POST /oauth2/v3/token") { request in
            let (status, json) = await hms.issueToken(form: String(decoding: request.body, as: UTF8.self))
            return EmulatorRouter.json(status, json)
        }
        router.add("POST /v1/*/messages:send") { request in
            let answer = await hms.send(
                clientID: String(request.path.split(separator: "/").dropFirst().first ?? ""),
                authorization: request.headers["authorization"], body: request.body)
            return try await EmulatorRouter.json(
                answer.status, answer.json, after: answer.delay, retryAfter: answer.retryAfter)
        }
        router.add("POST /emulator/hms-apps") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let clientID = object["client_id"] as? String, let secret = object["client_secret"] as? String else {
                return EmulatorRouter.json(400, #"{"error":"expected {\"client_id\": …, \"client_secret\": …}"}"#)
            }
            await hms.registerApp(clientID: clientID, secret: secret, urgent: object["urgent"] as? Bool ?? false)
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/hms") { _ in
            let list = await hms.received.map {
                "{\"client_id\":\(EmulatorRouter.quote($0.clientID)),\"request_id\":\(EmulatorRouter.quote($0.requestID)),\"validate_only\":\($0.validateOnly),\"message\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}
