import Foundation
import HeraldCrypto

/// A message HarmonyOS Push Kit's stand-in accepted.
public struct ReceivedHarmonyMessage: Sendable {
    /// The project, from the request's path.
    public var projectID: String
    public var token: String
    /// The `push-type` header: 0 a notification, 6 a background message.
    public var pushType: Int
    /// The request's `payload` object as JSON text.
    public var json: String
    public var ttl: Int?
    public var requestID: String
    /// `pushOptions.biTag`, which the message's receipt gives back.
    public var receiptTag: String?

    /// The `payload` object, parsed.
    public var payload: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    /// The notification's `clickAction.data`, or a background message's `extraData` parsed: what
    /// the app reads.
    public var data: [String: String] {
        if let notification = payload["notification"] as? [String: Any] {
            return (notification["clickAction"] as? [String: Any])?["data"] as? [String: String] ?? [:]
        }
        guard let extra = payload["extraData"] as? String else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(extra.utf8)) as? [String: String]) ?? [:]
    }
}

/// A stand-in for HarmonyOS Push Kit's v3 (scenario) API, strict about what Huawei documents:
///
/// - `POST /v3/{project id}/messages:send` takes `Authorization: Bearer <JWT>`, the service
///   account's own token, checked against the project's registered public key: PS256, its
///   `kid`, `iss` the sub-account, `aud` Huawei's token endpoint, `iat` and `exp` (80200001;
///   80200005 once expired; 80300036 for more than a day's validity).
/// - The `push-type` header is 0 (a notification: `payload.notification` with a category
///   Push Kit knows, `title` and `body`, neither empty, and `clickAction`; an `image` its review
///   has not passed is refused, 80100022, as the stand-in reviews none) or 6 (a background
///   message: `payload.extraData`, a string); the stand-in takes no other scenario (80100001).
/// - `target.token` holds 1 to 1000 tokens (80300010); `pushOptions` only Push Kit's members,
///   `ttl` from 1 to 15 days (80100004); at most 4096 bytes without the tokens (80300008).
///
/// It answers `{code, msg, requestId}`, or the error injected for the token
/// (``EmulatorBehaviour``): a refused token is listed under its reason in `msg`'s
/// `illegalTokens`, as Push Kit does.
actor HarmonyService {
    static let audience = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
    static let categories: Set<String> = [
        "IM", "VOIP", "SUBSCRIPTION", "TRAVEL", "HEALTH", "WORK", "ACCOUNT", "EXPRESS", "FINANCE", "DEVICE_REMINDER",
        "MAIL", "MARKETING",
    ]

    /// Each project's service account: its key id, sub-account and public key.
    private var projects: [String: (keyID: String, subAccount: String, key: CryptoKey)] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedHarmonyMessage] = []
    /// Every service-account token that came with a request, and those since expired.
    private(set) var tokensSeen: Set<String> = []
    private var expiredTokens: Set<String> = []
    private var nextRequestID = 1

    func registerProject(_ projectID: String, keyID: String, subAccount: String, publicKeyPEM: String) throws {
        projects[projectID] = (keyID, subAccount, try CryptoKey(publicKeyPEM: publicKeyPEM))
    }

    /// Every token seen so far expires now: the next request with one gets 80200005.
    func expireTokens() { expiredTokens = tokensSeen }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func send(projectID: String, headers: [String: String], body: Data) -> PushKitAnswer {
        if let refusal = authenticationProblem(projectID: projectID, authorization: headers["authorization"]) {
            return refusal
        }
        guard let pushType = headers["push-type"].flatMap(Int.init), [0, 6].contains(pushType) else {
            return PushKitAnswer.result(400, "80100001", "Check Parameter Error: push-type is 0 or 6 in this stand-in")
        }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return PushKitAnswer.result(400, "80100003", "Illegal payload, the body is not a JSON object")
        }
        if let problem = Self.problem(in: object, pushType: pushType, size: body.count) {
            return PushKitAnswer.result(400, problem.code, problem.words)
        }
        let token = ((object["target"] as? [String: Any])?["token"] as? [String])?.first ?? ""
        let (injected, delay) = injected(for: token)
        if let injected { return injected }
        let requestID = "\(Int64(Date().timeIntervalSince1970 * 1000))" + String(format: "%05ld", nextRequestID)
        nextRequestID += 1
        let payload = String(
            decoding: (try? JSONSerialization.data(withJSONObject: object["payload"] ?? [:], options: [.sortedKeys]))
                ?? Data(), as: UTF8.self)
        received.append(
            ReceivedHarmonyMessage(
                projectID: projectID, token: token, pushType: pushType, json: payload,
                ttl: (object["pushOptions"] as? [String: Any])?["ttl"] as? Int, requestID: requestID,
                receiptTag: (object["pushOptions"] as? [String: Any])?["biTag"] as? String))
        return PushKitAnswer(
            status: 200, json: #"{"code":"80000000","msg":"Success","requestId":"\#(requestID)"}"#, delay: delay)
    }

    /// What Push Kit refuses in the service account's token, with its answer.
    private func authenticationProblem(projectID: String, authorization: String?) -> PushKitAnswer? {
        let refused = PushKitAnswer.result(401, "80200001", "Authentication Error.")
        guard let bearer = authorization, bearer.hasPrefix("Bearer "), let project = projects[projectID],
            let jwt = JWT.decode(String(bearer.dropFirst(7)))
        else { return refused }
        let token = String(bearer.dropFirst(7))
        tokensSeen.insert(token)
        if expiredTokens.contains(token) { return PushKitAnswer.result(401, "80200005", "Jwt token expired.") }
        guard jwt.header["alg"] as? String == "PS256", jwt.header["typ"] as? String == "JWT",
            jwt.header["kid"] as? String == project.keyID, jwt.claims["iss"] as? String == project.subAccount,
            jwt.claims["aud"] as? String == Self.audience, jwt.claims["sub"] == nil,
            let issued = jwt.claims["iat"] as? Int, let expires = jwt.claims["exp"] as? Int,
            (try? project.key.verifyPS256(jwt.signingInput, signature: jwt.signature)) == true
        else { return refused }
        if expires - issued > 86_400 {
            return PushKitAnswer.result(400, "80300036", "JWT expire period over threshold.")
        }
        if expires <= Int(Date().timeIntervalSince1970) {
            return PushKitAnswer.result(401, "80200005", "Jwt token expired.")
        }
        return nil
    }

    /// What Push Kit refuses in a request, with its result code.
    static func problem(in object: [String: Any], pushType: Int, size: Int) -> (code: String, words: String)? {
        if let unknown = Set(object.keys).subtracting(["payload", "target", "pushOptions"]).first {
            return ("80100001", "Check Parameter Error: unknown member \(unknown)")
        }
        guard let payload = object["payload"] as? [String: Any] else {
            return ("80100003", "Illegal payload, payload is required")
        }
        guard let target = object["target"] as? [String: Any], let tokens = target["token"] as? [String],
            Set(target.keys) == ["token"]
        else { return ("80100001", "Check Parameter Error: target.token is required") }
        guard (1...1000).contains(tokens.count) else {
            return ("80300010", "token count should within 1 and 1000.")
        }
        if let options = object["pushOptions"] {
            guard let options = options as? [String: Any] else {
                return ("80100001", "Check Parameter Error: pushOptions")
            }
            let known: Set<String> = ["testMessage", "ttl", "biTag", "receiptId", "collapseKey"]
            if let unknown = Set(options.keys).subtracting(known).first {
                return ("80100001", "Check Parameter Error: unknown member pushOptions.\(unknown)")
            }
            if let tag = options["biTag"], (tag as? String)?.utf8.count ?? 65 > 64 {
                return ("80100001", "Check Parameter Error: biTag is a string of at most 64 bytes")
            }
            if let ttl = options["ttl"] {
                guard let ttl = ttl as? Int, (1...15 * 86_400).contains(ttl) else {
                    return ("80100004", "Illegal expire time.")
                }
            }
            if let key = options["collapseKey"] {
                guard let key = key as? Int, (-1...100).contains(key) else {
                    return ("80100001", "Check Parameter Error: collapseKey is -1 to 100")
                }
            }
        }
        if let problem = pushType == 0 ? alertProblem(payload) : backgroundProblem(payload) { return problem }
        let tokenBytes = tokens.reduce(0) { $0 + $1.utf8.count + 3 }
        if size - tokenBytes > 4096 { return ("80300008", "Push message size is too long.") }
        return nil
    }

    /// A notification (push-type 0): `payload.notification` alone.
    static func alertProblem(_ payload: [String: Any]) -> (code: String, words: String)? {
        guard Set(payload.keys) == ["notification"], let notification = payload["notification"] as? [String: Any]
        else { return ("80100003", "Illegal payload, an alert's payload is {notification}") }
        let known: Set<String> = [
            "category", "title", "body", "clickAction", "image", "style", "badge", "notifyId", "foregroundShow",
            "profileId", "appMessageId", "inboxContent", "sound", "soundDuration",
        ]
        if let unknown = Set(notification.keys).subtracting(known).first {
            return ("80100003", "Illegal payload, unknown member notification.\(unknown)")
        }
        guard let category = notification["category"] as? String, categories.contains(category) else {
            return ("80100003", "Illegal payload, category must be one of Push Kit's categories")
        }
        guard let title = notification["title"] as? String, let body = notification["body"] as? String, !title.isEmpty,
            !body.isEmpty
        else { return ("80100003", "Illegal payload, title and body are required") }
        guard let click = notification["clickAction"] as? [String: Any], let action = click["actionType"] as? Int,
            [0, 1].contains(action)
        else { return ("80100003", "Illegal payload, clickAction.actionType is required") }
        if let unknown = Set(click.keys).subtracting(["actionType", "action", "uri", "data"]).first {
            return ("80100003", "Illegal payload, unknown member clickAction.\(unknown)")
        }
        if action == 1, click["action"] == nil, click["uri"] == nil {
            return ("80100003", "Illegal payload, actionType 1 needs action or uri")
        }
        if let data = click["data"], !(data is [String: Any]) {
            return ("80100003", "Illegal payload, clickAction.data is an object")
        }
        if let image = notification["image"] {
            guard (image as? String)?.hasPrefix("https://") == true else {
                return ("80100003", "Illegal payload, image is an https URL")
            }
            // Push Kit shows only images its review has passed; the stand-in has reviewed none.
            return ("80100022", "Anti-Spam: image not verify.")
        }
        if let id = notification["notifyId"], !((id as? Int).map { (0...Int(Int32.max)).contains($0) } ?? false) {
            return ("80100003", "Illegal payload, notifyId is an integer from 0 to 2147483647")
        }
        if let badge = notification["badge"] {
            guard let badge = badge as? [String: Any], Set(badge.keys).isSubset(of: ["addNum", "setNum"]) else {
                return ("80100003", "Illegal payload, badge is {addNum, setNum}")
            }
            if let add = badge["addNum"], !((add as? Int).map { (1...99).contains($0) } ?? false) {
                return ("80100003", "Illegal payload, addNum ranges from 1 to 99")
            }
            if let set = badge["setNum"], !((set as? Int).map { (0...99).contains($0) } ?? false) {
                return ("80100003", "Illegal payload, setNum ranges from 0 to 99")
            }
        }
        return nil
    }

    /// A background message (push-type 6): `payload.extraData`, a string, alone.
    static func backgroundProblem(_ payload: [String: Any]) -> (code: String, words: String)? {
        guard Set(payload.keys) == ["extraData"], payload["extraData"] is String else {
            return ("80100003", "Illegal payload, a background message's payload is {extraData: string}")
        }
        return nil
    }

    /// The error injected for `token`, or how long to wait before answering as usual.
    private func injected(for token: String) -> (PushKitAnswer?, delay: Duration?) {
        guard let entry = behaviours[token] else { return (nil, nil) }
        if let remaining = entry.remaining {
            behaviours[token] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
        }
        func refused(_ reason: String) -> PushKitAnswer {
            let msg = #"{"failure":1,"illegalTokens":{"\#(reason)":["\#(token)"]}}"#
            return PushKitAnswer.result(200, "80300007", msg)
        }
        let answer: PushKitAnswer
        switch entry.behaviour {
        case .unregistered, .unregisteredSince, .gone:
            // A phone's token from before it moved to HarmonyOS NEXT, or another project's.
            answer = refused("noRight")
        case .invalidToken:
            answer = refused("tokenFormatError")
        case .senderIDMismatch, .thirdPartyAuthError:
            answer = PushKitAnswer.result(403, "80300002", "No permission to send message to these tmIDs.")
        case .expiredProviderToken:
            answer = PushKitAnswer.result(401, "80200005", "Jwt token expired.")
        case .quotaExceeded(let retryAfter), .unavailable(let retryAfter):
            answer = PushKitAnswer(status: 503, json: "traffic control", retryAfter: retryAfter)
        case .internalError:
            answer = PushKitAnswer.result(500, "81000001", "Inner Error.")
        case .invalidMessage, .payloadTooLarge:
            answer = PushKitAnswer.result(400, "80100003", "Illegal payload, refused by the stand-in")
        case .garbledAnswer:
            answer = PushKitAnswer.result(400, "80100003", "Illegal \u{0}payload\u{7}\u{1B}[31m")
        case .slow(let milliseconds):
            return (nil, .milliseconds(milliseconds))
        }
        return (answer, nil)
    }
}

extension HarmonyService: EmulatedService {
    /// HarmonyOS Push Kit's sends, and what registers a project and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let harmony = self
        router.add("POST /v3/*/messages:send") { request in
            let answer = await harmony.send(
                projectID: String(request.path.split(separator: "/").dropFirst().first ?? ""),
                headers: request.headers, body: request.body)
            return try await EmulatorRouter.json(
                answer.status, answer.json, after: answer.delay, retryAfter: answer.retryAfter)
        }
        router.add("POST /emulator/harmony-projects") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let project = object["project_id"] as? String, let keyID = object["key_id"] as? String,
                let subAccount = object["sub_account"] as? String, let publicKey = object["public_key"] as? String,
                (try? await harmony.registerProject(
                    project, keyID: keyID, subAccount: subAccount, publicKeyPEM: publicKey)) != nil
            else {
                return EmulatorRouter.json(
                    400,
                    #"{"error":"expected {\"project_id\", \"key_id\", \"sub_account\", \"public_key\": a PEM public key}"}"#
                )
            }
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/harmony") { _ in
            let list = await harmony.received.map {
                "{\"project_id\":\(EmulatorRouter.quote($0.projectID)),\"request_id\":\(EmulatorRouter.quote($0.requestID)),\"push_type\":\($0.pushType),\"token\":\(EmulatorRouter.quote($0.token)),\"payload\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}
