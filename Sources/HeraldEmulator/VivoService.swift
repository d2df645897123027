import Foundation
import HeraldCrypto

/// A message vivo Push's stand-in accepted.
public struct ReceivedVivoMessage: Sendable {
    public var regID: String
    /// The request's body as JSON text.
    public var json: String
    public var taskID: String

    /// The request's body, parsed.
    public var body: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    /// `clientCustomMap`, as the app reads it from the tapped notification's intent.
    public var custom: [String: String] { body["clientCustomMap"] as? [String: String] ?? [:] }
}

/// A stand-in for vivo Push's server API, as vivo's "PUSH-UPS-API接口文档" (doc 362, v2.9.2,
/// read through its reposts) and its Java server SDK describe it; where they differ, the SDK:
///
/// - `POST /message/auth` takes `{appId, appKey, timestamp, sign}` of a registered app: a
///   millisecond timestamp within ten minutes, `sign` the lower-case hex MD5 of appId + appKey +
///   timestamp + appSecret. It answers `{result: 0, desc, authToken}` (a day long), or a refusal.
/// - `POST /message/send` checks the `authToken` header (10000 unknown or expired), the body's
///   `appId` against the token's (10094), and the body: only vivo's members; `regId`; `notifyType`
///   1 to 4; `title` at most 40 wide and `content` 100 (a Chinese character counts two); a
///   `timeToLive` of 60 s to 7 days (the SDK's `Constants`); `skipType` 1, 2 with an http(s)
///   `skipContent` of at most 1000 characters, or 4 with an intent URI of at most 1024 (3 is
///   gone since SDK 480); `networkType` -1 or 1; `classification` 0 or 1 with a `category` of
///   its class (doc 359); `clientCustomMap` of at most 10 string pairs, 1024 characters; a
///   `requestId` of at most 64 characters, and a send with one already taken is answered as
///   that one was, not sent again; `pushMode` 0 or 1. Operation messages (classification 0)
///   count per phone and China's day: over the app's limit (5) it answers 10073.
///   It answers `{result: 0, desc, taskId}`, or the error injected for the regId
///   (``EmulatorBehaviour``): 10302 with `invalidUser` for a dead one, 10070 the daily total,
///   10072 too fast. Parameter errors are 10xxx codes of the stand-in's own (vivo's table has
///   one a field; they mean the same: this message, for good).
actor VivoService {
    private var apps: [String: (key: String, secret: String)] = [:]
    private var operationLimit = 5
    private var authTokens: [String: (appID: String, expires: Date)] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private var taken: [String: String] = [:]
    private var operationCounts: [String: Int] = [:]
    private(set) var received: [ReceivedVivoMessage] = []
    private(set) var authRequests = 0
    private var nextTask = 1

    static let systemCategories: Set<String> = ["IM", "ACCOUNT", "TODO", "DEVICE_REMINDER", "ORDER", "SUBSCRIPTION"]
    static let operationCategories: Set<String> = ["NEWS", "CONTENT", "MARKETING", "SOCIAL"]
    static let parameterError = 10050

    /// Trusts `appID` with its key and secret; `operationLimit` operation messages a day on
    /// each phone.
    func registerApp(appID: String, key: String, secret: String, operationLimit: Int = 5) {
        apps[appID] = (key, secret)
        self.operationLimit = operationLimit
    }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func expireAuthTokens() {
        for token in authTokens.keys { authTokens[token]?.expires = .distantPast }
    }

    static func answer(_ result: Int, _ desc: String, extra: String = "") -> String {
        #"{"result":\#(result),"desc":\#(EmulatorRouter.quote(desc))\#(extra)}"#
    }

    static func number(_ value: Any?) -> String? {
        if let text = value as? String { return text }
        if let number = value as? NSNumber, !(value is Bool) { return number.stringValue }
        return nil
    }

    func auth(body: Data) -> (Int, String) {
        authRequests += 1
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let appID = Self.number(object["appId"]), let key = object["appKey"] as? String,
            let timestamp = Self.number(object["timestamp"]).flatMap({ Int64($0) }),
            let sign = object["sign"] as? String
        else { return (200, Self.answer(Self.parameterError, "appId, appKey, timestamp and sign are required")) }
        guard abs(Double(timestamp) / 1000 - Date().timeIntervalSince1970) < 600 else {
            return (200, Self.answer(10_203, "timestamp is not within ten minutes (it is milliseconds)"))
        }
        guard let app = apps[appID], app.key == key else { return (200, Self.answer(10_200, "appId或appKey不合法")) }
        let text = appID + key + "\(timestamp)" + app.secret
        guard sign == Digest.hex(Digest.md5(Array(text.utf8))) else {
            return (200, Self.answer(10_201, "sign不合法"))
        }
        let token = "vivo-" + UUID().uuidString.lowercased()
        authTokens[token] = (appID, Date().addingTimeInterval(86_400))
        return (200, Self.answer(0, "请求成功", extra: #","authToken":"\#(token)""#))
    }

    func send(headers: [String: String], body: Data) -> PushKitAnswer {
        guard let token = headers["authtoken"], let grant = authTokens[token], grant.expires > Date() else {
            return PushKitAnswer(status: 200, json: Self.answer(10000, "authToken不合法或已过期"))
        }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return PushKitAnswer(status: 200, json: Self.answer(Self.parameterError, "请求体不是JSON"))
        }
        if let appID = object["appId"], Self.number(appID) != grant.appID {
            return PushKitAnswer(status: 200, json: Self.answer(10094, "appId与authToken不一致"))
        }
        if let problem = Self.problem(in: object) {
            return PushKitAnswer(status: 200, json: Self.answer(problem.code, problem.words))
        }
        let regID = object["regId"] as? String ?? ""
        let requestID = object["requestId"] as? String ?? ""
        if let task = taken[requestID] {
            return PushKitAnswer(status: 200, json: Self.answer(0, "请求成功", extra: #","taskId":"\#(task)""#))
        }
        var delay: Duration?
        if let entry = behaviours[regID] {
            if let remaining = entry.remaining {
                behaviours[regID] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
            }
            let dead = { (status: Int) in
                PushKitAnswer(
                    status: 200,
                    json: Self.answer(
                        10302, "regId不合法",
                        extra: #","invalidUser":{"status":\#(status),"userid":\#(EmulatorRouter.quote(regID))}"#))
            }
            switch entry.behaviour {
            case .slow(let milliseconds): delay = .milliseconds(milliseconds)
            case .unregistered, .unregisteredSince: return dead(2)
            case .gone, .invalidToken: return dead(1)
            case .expiredProviderToken:
                return PushKitAnswer(status: 200, json: Self.answer(10000, "authToken不合法或已过期"))
            case .senderIDMismatch, .thirdPartyAuthError:
                return PushKitAnswer(status: 200, json: Self.answer(10094, "appId与authToken不一致"))
            case .quotaExceeded:
                return PushKitAnswer(status: 200, json: Self.answer(10070, "发送总量超出限制"))
            case .unavailable(let retryAfter):
                return PushKitAnswer(status: 200, json: Self.answer(10072, "发送频率过快"), retryAfter: retryAfter)
            case .internalError: return PushKitAnswer(status: 500, json: "Internet server error!")
            case .invalidMessage, .payloadTooLarge:
                return PushKitAnswer(status: 200, json: Self.answer(10_055, "content长度超过限制"))
            case .garbledAnswer:
                return PushKitAnswer(status: 200, json: Self.answer(10_056, "Illegal \u{0}title\u{7}\u{1B}[31m"))
            }
        }
        if object["classification"] as? Int ?? 0 == 0 {
            let day = Int((Date().timeIntervalSince1970 + 8 * 3600) / 86_400)
            let counted = "\(regID) \(day)"
            guard operationCounts[counted, default: 0] < operationLimit else {
                return PushKitAnswer(status: 200, json: Self.answer(10073, "该用户当天运营消息接收条数超过限制"))
            }
            operationCounts[counted, default: 0] += 1
        }
        let task = "\(Int64(Date().timeIntervalSince1970))" + String(format: "%04ld", nextTask)
        nextTask += 1
        taken[requestID] = task
        received.append(ReceivedVivoMessage(regID: regID, json: String(decoding: body, as: UTF8.self), taskID: task))
        return PushKitAnswer(
            status: 200, json: Self.answer(0, "请求成功", extra: #","taskId":"\#(task)""#), delay: delay)
    }

    /// vivo's width: a Chinese (any non-ASCII) character counts two, an emoji one.
    static func width(_ text: String) -> Int {
        text.reduce(0) { sum, character in
            sum + (character.isASCII || character.unicodeScalars.first?.properties.isEmojiPresentation == true ? 1 : 2)
        }
    }

    /// What vivo Push refuses in a send, with a code.
    static func problem(in object: [String: Any]) -> (code: Int, words: String)? {
        let members: Set<String> = [
            "appId", "regId", "alias", "notifyType", "title", "content", "timeToLive", "skipType", "skipContent",
            "networkType", "classification", "category", "clientCustomMap", "extra", "requestId", "pushMode",
            "auditReview", "notifyId", "sendOnline",
        ]
        if let unknown = Set(object.keys).subtracting(members).first { return (10_051, "不支持的参数 \(unknown)") }
        guard let regID = object["regId"] as? String, !regID.isEmpty else { return (10_052, "regId不能为空") }
        guard let notifyType = object["notifyType"] as? Int, (1...4).contains(notifyType) else {
            return (10_053, "notifyType不合法 (1 to 4)")
        }
        guard let title = object["title"] as? String, !title.isEmpty, width(title) <= 40 else {
            return (10_054, "title不能为空且不超过40个字符 (a Chinese character counts two)")
        }
        guard let content = object["content"] as? String, !content.isEmpty, width(content) <= 100 else {
            return (10_055, "content不能为空且不超过100个字符 (a Chinese character counts two)")
        }
        if let ttl = object["timeToLive"], !(60...604_800).contains(ttl as? Int ?? -1) {
            return (10_057, "timeToLive不合法 (60 s to 7 days)")
        }
        let skipContent = object["skipContent"] as? String
        switch object["skipType"] as? Int {
        case 1?: break
        case 2?
        where (skipContent?.hasPrefix("http://") == true || skipContent?.hasPrefix("https://") == true)
            && skipContent!.count <= 1000:
            break
        case 4? where skipContent.map { !$0.isEmpty && $0.count <= 1024 } == true: break
        default: return (10_058, "skipType is 1, 2 with a web page, or 4 with an intent URI (skipContent)")
        }
        if let network = object["networkType"], ![-1, 1].contains(network as? Int ?? 0) {
            return (10_059, "networkType is -1 or 1")
        }
        let classification = object["classification"] as? Int ?? 0
        guard [0, 1].contains(classification) else { return (10_060, "classification is 0 or 1") }
        if let category = object["category"] {
            let allowed = classification == 1 ? systemCategories : operationCategories
            guard let category = category as? String, allowed.contains(category) else {
                return (10_061, "category不属于classification \(classification)的分类")
            }
        } else if classification == 1 {
            return (10_061, "a system message (classification 1) names its category")
        }
        if let custom = object["clientCustomMap"] {
            guard let custom = custom as? [String: String], custom.count <= 10,
                custom.reduce(0, { $0 + $1.key.count + $1.value.count }) <= 1024
            else { return (10_062, "clientCustomMap: at most 10 string pairs, 1024 characters") }
        }
        guard let requestID = object["requestId"] as? String, (1...64).contains(requestID.count) else {
            return (10_063, "requestId is 1 to 64 characters")
        }
        if let mode = object["pushMode"], ![0, 1].contains(mode as? Int ?? -1) {
            return (10_064, "pushMode is 0 or 1")
        }
        if let id = object["notifyId"], !(id is Int) { return (10_065, "notifyId is an integer") }
        return nil
    }
}

extension VivoService: EmulatedService {
    /// vivo's auth and sends, and what registers an app and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let vivo = self
        router.add("POST /message/auth") { request in
            let (status, json) = await vivo.auth(body: request.body)
            return EmulatorRouter.json(status, json)
        }
        router.add("POST /message/send") { request in
            let answer = await vivo.send(headers: request.headers, body: request.body)
            return try await EmulatorRouter.json(
                answer.status, answer.json, after: answer.delay, retryAfter: answer.retryAfter)
        }
        router.add("POST /emulator/vivo-apps") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let appID = VivoService.number(object["app_id"]), let key = object["app_key"] as? String,
                let secret = object["app_secret"] as? String
            else {
                return EmulatorRouter.json(
                    400, #"{"error":"expected {\"app_id\": …, \"app_key\": …, \"app_secret\": …}"}"#)
            }
            await vivo.registerApp(
                appID: appID, key: key, secret: secret, operationLimit: object["operation_limit"] as? Int ?? 5)
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/vivo") { _ in
            let list = await vivo.received.map {
                "{\"task_id\":\(EmulatorRouter.quote($0.taskID)),\"message\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}

extension Emulator {
    /// Trusts a vivo app's AppID, AppKey and AppSecret; `operationLimit` operation messages a
    /// day on each phone.
    public func registerVivoApp(appID: String, key: String, secret: String, operationLimit: Int = 5) async {
        await routes.vivo.registerApp(appID: appID, key: key, secret: secret, operationLimit: operationLimit)
    }

    /// The messages vivo Push's stand-in accepted, and the auth requests it took.
    public var vivoReceived: [ReceivedVivoMessage] { get async { await routes.vivo.received } }
    public var vivoAuthRequests: Int { get async { await routes.vivo.authRequests } }

    /// Expires every vivo authToken issued so far (the next send with one gets 10000).
    public func expireVivoAuthTokens() async { await routes.vivo.expireAuthTokens() }
}
