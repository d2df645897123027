import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Logging

extension ConfigurationScope {
    /// An app's vivo Push setup (`herald.app_vivo`).
    static let vivo: Self = "vivo"
}

/// Sends messages to vivo's phones (OriginOS, Funtouch OS) through vivo Push's server API
/// (`POST api-push.vivo.com.cn/message/send`, one regId a request, JSON, an `authToken` header),
/// with an `authToken` from `/message/auth` (the app's id and key, a millisecond timestamp and
/// their MD5 signature with the app's secret), and reads each answer into a typed outcome
/// (``VivoResult``). A refused authToken is fetched again and the message sent once more. It
/// knows no database.
///
/// Sources: vivo's "PUSH-UPS-API接口文档" (dev.vivo.com.cn/documentCenter/doc/362, version 2.9.2,
/// read through its reposts), vivo's Java server SDK (`com.vivo.push.sdk.server.Sender`,
/// `com.vivo.push.sdk.common.Constants`), and the open-source clients that follow it
/// (modood/pushapi's `vivopush`). Where they differ, the SDK wins (noted where it matters).
struct VivoPushClient: Sendable {
    static let endpoint = "https://api-push.vivo.com.cn"

    let tokens: AccessTokens
    let http: HTTPClient
    let sendURL: String

    /// `endpoint`, a stand-in's base URL, serves both the send and the auth requests.
    init(appID: String, appKey: String, appSecret: String, endpoint: String?, http: HTTPClient, logger: Logger) {
        self.http = http
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? Self.endpoint
        sendURL = base + "/message/send"
        let authURL = base + "/message/auth"
        tokens = AccessTokens(name: "vivo app \(appID)", logger: logger) { () async throws(AccessTokenError) in
            try await Self.auth(appID: appID, appKey: appKey, appSecret: appSecret, url: authURL, http: http)
        }
    }

    /// `/message/auth`'s signature (doc 362, 推送鉴权接口): the lower-case hex MD5 of appId +
    /// appKey + timestamp + appSecret, each trimmed, the timestamp in milliseconds (vivo takes
    /// one within ten minutes of its clock).
    static func sign(appID: String, appKey: String, timestamp: Int64, appSecret: String) -> String {
        let text = appID.trimmed + appKey.trimmed + "\(timestamp)" + appSecret.trimmed
        return Digest.hex(Digest.md5(Array(text.utf8)))
    }

    /// One authToken. vivo keeps one a day and asks callers to fetch a new one every hour or two
    /// (doc 362): it is taken as two hours long. A refusal is the app's setup; 10093 (more than
    /// ten auth requests a second) and no answer may pass.
    static func auth(appID: String, appKey: String, appSecret: String, url: String, http: HTTPClient)
        async throws(AccessTokenError) -> (token: String, lifetime: TimeInterval)
    {
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000)
        // The SDK's `getToken(int appId, String appKey)` sends appId as a number.
        let body = JSONValue.object([
            ("appId", Int(appID).map(JSONValue.int) ?? .string(appID)), ("appKey", .string(appKey)),
            ("timestamp", .int(Int(timestamp))),
            ("sign", .string(sign(appID: appID, appKey: appKey, timestamp: timestamp, appSecret: appSecret))),
        ])
        let request = HTTPRequest(
            url: url, headers: [("Content-Type", "application/json;charset=UTF-8")], body: body.encodedBytes,
            timeout: .seconds(20))
        let response: HTTPResponse
        switch await http.send([request])[0] {
        case .success(let answered): response = answered
        case .failure(let error): throw AccessTokenError.unavailable(error.reason(sendingTo: "vivo Push's auth"))
        }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        let result = (object?["result"] as? NSNumber)?.intValue
        let desc = String((object?["desc"] as? String ?? "").prefix(200))
        switch (response.status, result) {
        case (200, 0?):
            guard let token = object?["authToken"] as? String, !token.isEmpty else {
                throw AccessTokenError.unavailable("vivo Push's auth answered 0 without an authToken")
            }
            return (token, 2 * 3600)
        case (401, _), (403, _):
            throw AccessTokenError.configuration(
                "vivo Push refused app \(appID)'s appKey and appSecret (HTTP \(response.status): \(desc))")
        case (_, VivoResult.tooFrequent?), (429, _), (500...599, _), (_, nil):
            throw AccessTokenError.unavailable("vivo Push's auth answered \(result ?? response.status): \(desc)")
        default:
            throw AccessTokenError.configuration(
                "vivo Push refused app \(appID)'s appKey and appSecret (\(result.map(String.init) ?? "HTTP \(response.status)"): \(desc))"
            )
        }
    }

    /// Sends each message (a request each, at once); the answers come in the same order, each
    /// read as the outcome for its regId.
    func send(_ messages: [VivoMessage]) async -> [VivoResult] {
        await tokens.sending(messages.count, noToken: VivoResult.init(tokenError:), refused: \.authTokenRefused) {
            token, indices in
            let headers = [("authToken", token), ("Content-Type", "application/json;charset=UTF-8")]
            let answers = await http.send(
                indices.map {
                    HTTPRequest(url: sendURL, headers: headers, body: messages[$0].requestBody, timeout: .seconds(10))
                })
            return zip(indices, answers).map { index, answer in
                switch answer {
                case .success(let response): VivoResult(response, regID: messages[index].regID)
                case .failure(let error): VivoResult(failure: error)
                }
            }
        }
    }
}

extension String {
    fileprivate var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// One notification to one regId, as vivo Push's `/message/send` takes it (doc 362, 单推接口).
/// vivo shows every message it takes (it has no pass-through message): a `title` and `content`,
/// what a tap does (`skipType` 1 the app, 2 a web page, 4 an intent URI the app handles; 3, the
/// old custom click, is gone since its SDK 480), its class (`classification` 1 a system message,
/// with a system `category`, for service; 0 an operation message for marketing, which vivo shows
/// quietly, only in its daytime and a few a day on each phone), `clientCustomMap` (the producer's
/// data and Herald's keys, which the app reads from the tapped intent's extras), a `requestId`
/// from the delivery (doc 362: "用户请求唯一标识", at most 64 characters; that vivo takes a
/// retried send once by it is how the issue reads it, not confirmed by vivo's pages), and a
/// `notifyId`, so a repeated send replaces the notification.
struct VivoMessage: Sendable {
    var appID: String
    var regID: String
    var title: String
    var content: String
    var tap: PayloadBuilder.Tap
    var service: Bool
    var category: String?
    var custom: [(String, String)]
    var requestID: String
    var notifyID: Int
    /// Seconds, held to what vivo takes.
    var ttl: Int
    /// `pushMode` 1: only the app's test phones (an app under review can send only so).
    var test: Bool

    /// doc 362: a title of at most 20 Chinese characters or 40 others, a content of at most 50
    /// or 100 (a Chinese character counts two).
    static let longestTitle = 40
    static let longestContent = 100
    /// `clientCustomMap`: at most 10 pairs, 1024 characters in all (doc 362).
    static let mostCustomPairs = 10
    static let longestCustom = 1024
    /// The SDK's `Constants`: a single send is kept 60 s to 7 days (doc 362 says "at least 900"
    /// for its broadcast, the SDK 60 for a single send: the SDK wins).
    static let ttlRange = 60...604_800

    /// How wide vivo counts `text`: a character outside ASCII as two (a Chinese one is; an emoji,
    /// which vivo counts as one, is taken as two, to be safe).
    static func width(_ text: String) -> Int { text.reduce(0) { $0 + ($1.isASCII ? 1 : 2) } }

    /// `text` within `limit` of vivo's width, its last character an ellipsis when it was longer.
    static func shortened(_ text: String, to limit: Int) -> String {
        guard width(text) > limit else { return text }
        var kept = ""
        var used = 2  // the ellipsis
        for character in text {
            let wide = character.isASCII ? 1 : 2
            if used + wide > limit { break }
            kept.append(character)
            used += wide
        }
        return kept + "…"
    }

    /// Why vivo would refuse the custom map, or nil.
    var customProblem: String? {
        let length = custom.reduce(0) { $0 + $1.0.count + $1.1.count }
        if custom.count > Self.mostCustomPairs || length > Self.longestCustom {
            return "vivo Push takes at most \(Self.mostCustomPairs) keys and \(Self.longestCustom) characters of data"
                + " (clientCustomMap); this notification has \(custom.count) keys, \(length) characters"
        }
        return nil
    }

    var requestBody: [UInt8] {
        // appId (v2.9.2, checked against the authToken's: 10094) as a number, as the SDK's
        // getToken takes it; modood/pushapi sends a string (not confirmed which vivo prefers).
        var fields: [(String, JSONValue)] = [
            ("appId", Int(appID).map(JSONValue.int) ?? .string(appID)), ("regId", .string(regID)),
            ("notifyType", .int(service ? 4 : 1)),
            ("title", .string(Self.shortened(title, to: Self.longestTitle))),
            ("content", .string(Self.shortened(content, to: Self.longestContent))),
            ("timeToLive", .int(min(max(ttl, Self.ttlRange.lowerBound), Self.ttlRange.upperBound))),
        ]
        switch tap {
        case .openApp: fields.append(("skipType", .int(1)))
        case .openWeb(let url): fields += [("skipType", .int(2)), ("skipContent", .string(url))]
        case .openIntent(let uri): fields += [("skipType", .int(4)), ("skipContent", .string(uri))]
        }
        fields += [("networkType", .int(-1)), ("classification", .int(service ? 1 : 0))]
        if let category { fields.append(("category", .string(category))) }
        if !custom.isEmpty { fields.append(("clientCustomMap", .object(custom.map { ($0.0, .string($0.1)) }))) }
        fields += [
            ("requestId", .string(requestID)), ("pushMode", .int(test ? 1 : 0)), ("notifyId", .int(notifyID)),
        ]
        return JSONValue.object(fields).encodedBytes
    }
}

/// vivo Push's answer to one send: `{result, desc, taskId, invalidUser: {status, userid}}`, in a
/// 200 whatever became of the message; or why there was none.
struct VivoResult: Sendable {
    var status: Int?
    var result: Int?
    var taskID: String?
    /// `invalidUser.status` with 10302: 1 no such regId, 2 the app uninstalled or its
    /// notifications turned off, 3 not online for 90 days, 4 not a test phone (pushMode 1).
    var invalidUser: Int?
    /// `desc`, at most 300 characters, without the regId.
    var words: String
    var retryAfter: Duration?
    var tokenError: AccessTokenError?

    init(_ response: HTTPResponse, regID: String) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        result = (object?["result"] as? NSNumber)?.intValue
        taskID = (object?["taskId"] as? String) ?? (object?["taskId"] as? NSNumber).map { "\($0)" }
        invalidUser = ((object?["invalidUser"] as? [String: Any])?["status"] as? NSNumber)?.intValue
        let text = object?["desc"] as? String ?? String(decoding: response.body.prefix(300), as: UTF8.self)
        words = String((regID.isEmpty ? text : text.replacingOccurrences(of: regID, with: "…")).prefix(300))
        retryAfter = response.retryAfter(now: Date())
    }

    init(failure: HTTPClientError) {
        words = failure.reason(sendingTo: "vivo Push")
        status = failure.kind == .invalidRequest ? 400 : nil
    }

    init(tokenError: AccessTokenError) {
        self.tokenError = tokenError
        words = tokenError.description
    }

    init(result: Int, words: String) {
        status = 200
        self.result = result
        self.words = words
    }

    static let success = 0
    /// 10000: the authToken is not valid (expired, or not vivo's): worth one more try with a
    /// fresh one, then the app's setup. (The code's meaning is from the open-source clients;
    /// vivo's table was not readable.)
    static let authTokenInvalid = 10000
    /// 10302: the regId is not valid (doc 362's own example), with `invalidUser`.
    static let regIDInvalid = 10302
    /// 10070: the app's total for the day is spent (doc 362, 推送超量说明: "发送总量超出限制",
    /// do not call /message/send again that day). 10071 is taken as a daily quota too (the
    /// issue's reading; not confirmed).
    static let dailyQuota: Set<Int> = [10070, 10071]
    /// 10072: sends too fast (the app's QPS; from open-source clients, not confirmed); 10093:
    /// more than 10 auth requests a second (doc 362).
    static let tooFast = 10072
    static let tooFrequent = 10093
    /// 10073: this phone's operation messages for the day are spent (vivo takes 2 a day, 5 for a
    /// news app, on each phone; the code is not confirmed). Only this delivery waits.
    static let phoneDailyLimit = 10073
    /// 10094: the body's appId is not the authToken's (doc 362, v2.9.2).
    static let appIDMismatch = 10094

    var authTokenRefused: Bool { status == 401 || result == Self.authTokenInvalid }

    /// What it means for the message (docs/architecture.md's table of answers).
    /// `untilTomorrow`: until midnight in China, when vivo's daily counts start again.
    func outcome(untilTomorrow: Duration) -> PushOutcome {
        if let tokenError { return tokenError.outcome(scope: .vivo) }
        let said = "vivo Push \(result.map(String.init) ?? status.map { "HTTP \($0)" } ?? "")"
        let reason = "\(said): \(words)"
        if let result {
            switch result {
            case Self.success:
                return .sent(messageName: taskID ?? "")
            case Self.regIDInvalid where invalidUser == 4:
                return .permanentFailure(reason: reason + " (not one of the app's test phones, and pushMode is 1)")
            case Self.regIDInvalid:
                return .tokenInvalid(reason: reason + (invalidUser.map { " (invalidUser.status \($0))" } ?? ""))
            case Self.authTokenInvalid, Self.appIDMismatch:
                return .configurationError(reason: reason, scope: .vivo)
            case _ where Self.dailyQuota.contains(result):
                return .overQuota(after: untilTomorrow, reason: reason + " (the app's daily total for its class)")
            case Self.phoneDailyLimit:
                return .overQuota(after: untilTomorrow, reason: reason + " (this phone's operation messages today)")
            case Self.tooFast, Self.tooFrequent:
                return .overQuota(after: retryAfter ?? .seconds(1), reason: reason + " (the app's rate)")
            case 10_000...10_999:
                // vivo's request errors (a parameter it refuses: a length, a category, a
                // skipType): this message, for good.
                return .permanentFailure(reason: reason)
            default:
                // A code Herald does not know, tried again as far as the delivery's retries go
                // rather than lost at once.
                return .retry(after: retryAfter, reason: reason)
            }
        }
        return .ofStatus(status, said: said, reason: reason, retryAfter: retryAfter, scope: .vivo)
    }
}
