import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Logging

extension ConfigurationScope {
    /// An app's OPPO Push setup (`herald.app_oppo`).
    static let oppo: Self = "oppo"
}

/// Sends notifications to OPPO's phones (ColorOS), and OnePlus's and realme's, which share it,
/// through OPPO Push's server API (`POST /server/v1/message/notification/unicast`, one
/// registration id a request, form-encoded), with an `auth_token` from
/// `POST /server/v1/auth`, and reads each answer into a typed outcome (``OPPOResult``). A
/// refused auth token (11) is fetched again and the message sent once more, as OPPO's own server
/// SDK does. It knows no database.
///
/// Sources: OPPO's open platform pages ("鉴权" developmentDoc id=11234, "单点推送" id=11235,
/// "通知栏消息" id=11236, the public return codes) and OPPO's server SDK for Java
/// (`com.oppo.push.server`, opush-server-sdk 1.1.0: `Auth`, `Sender`, `MessageTool`,
/// `ReturnCode`, `Validate`, `RequestPath`).
struct OPPOPushClient: Sendable {
    /// OPPO Push's hosts: mainland China's, or the one for phones elsewhere (the SDK's
    /// `Environment.INTERNATIONAL`).
    enum Region: String, Sendable, Decodable {
        case china, international

        var host: String {
            switch self {
            case .china: "https://api.push.oppomobile.com"
            case .international: "https://api-intl.push.oppomobile.com"
            }
        }
    }

    let tokens: AccessTokens
    let http: HTTPClient
    let sendURL: String
    let authURL: String

    /// `endpoint`, a stand-in's base URL, replaces the region's host for both requests.
    init(
        appKey: String, masterSecret: String, region: Region, endpoint: String?, http: HTTPClient,
        logger: Logger = Logger(label: "herald.oppo")
    ) {
        self.http = http
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? region.host
        sendURL = base + "/server/v1/message/notification/unicast"
        let authURL = base + "/server/v1/auth"
        self.authURL = authURL
        tokens = AccessTokens(name: "OPPO app key \(appKey)", logger: logger) { () async throws(AccessTokenError) in
            try await Self.authenticate(appKey: appKey, masterSecret: masterSecret, url: authURL, http: http)
        }
    }

    /// The auth request's `sign`: the lower-case hex SHA-256 of the app key, the timestamp (in
    /// milliseconds) and the master secret, one after the other (the SDK's `Auth.getSign`).
    static func sign(appKey: String, timestamp: Int64, masterSecret: String) -> String {
        Digest.hex(Digest.sha256(Array("\(appKey)\(timestamp)\(masterSecret)".utf8)))
    }

    /// Codes of the auth endpoint that say the app's setup is wrong, not the moment: 14 invalid
    /// app key, 15 missing app key, 16 invalid signature (the master secret), 17 missing
    /// signature, 26 IP black list, 27 access denied, 28 app disabled, 30 API permission denied.
    static let refusedSetup: Set<Int> = [14, 15, 16, 17, 26, 27, 28, 30]

    /// One auth request: `app_key`, `sign` and `timestamp` (milliseconds; OPPO allows ten
    /// minutes of difference) as a form; the answer `{code, message, data: {auth_token,
    /// create_time}}`. OPPO's token lasts 24 hours.
    static func authenticate(appKey: String, masterSecret: String, url: String, http: HTTPClient)
        async throws(AccessTokenError) -> (token: String, lifetime: TimeInterval)
    {
        let timestamp = Int64(Date().timeIntervalSince1970 * 1000)
        let form = formEncoded([
            ("app_key", appKey), ("sign", sign(appKey: appKey, timestamp: timestamp, masterSecret: masterSecret)),
            ("timestamp", "\(timestamp)"),
        ])
        let request = HTTPRequest(
            url: url, headers: [("Content-Type", "application/x-www-form-urlencoded;charset=UTF-8")],
            body: Array(form.utf8), timeout: .seconds(20))
        let response: HTTPResponse
        switch await http.send([request])[0] {
        case .success(let answered): response = answered
        case .failure(let error): throw AccessTokenError.unavailable(error.reason(sendingTo: "OPPO's auth endpoint"))
        }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        let code = (object?["code"] as? NSNumber)?.intValue
        let words = String((object?["message"] as? String ?? "").prefix(200))
        if code == 0, let token = (object?["data"] as? [String: Any])?["auth_token"] as? String, !token.isEmpty {
            return (token, 86_400)
        }
        if let code, refusedSetup.contains(code) {
            throw AccessTokenError.configuration("OPPO's auth endpoint refused app key \(appKey): \(code) \(words)")
        }
        if response.status == 401 || response.status == 403 {
            throw AccessTokenError.configuration(
                "OPPO's auth endpoint refused app key \(appKey): HTTP \(response.status)")
        }
        // 19 (the timestamp: this host's clock), -1, -2, a 5xx, an answer without a code.
        throw AccessTokenError.unavailable(
            "OPPO's auth endpoint answered \(code.map(String.init) ?? "HTTP \(response.status)") \(words)")
    }

    /// Sends each message (a request each, at once); the answers come in the same order, each
    /// read as the outcome for its registration id.
    func send(_ messages: [OPPOMessage]) async -> [OPPOResult] {
        await tokens.sending(
            messages.count, noToken: OPPOResult.init(tokenError:), refused: { $0.code == OPPOResult.invalidAuthToken }
        ) { token, indices in
            // The SDK and OPPO's older pages put `auth_token` in the form; the newer pages name it
            // a header. Both are sent, the same token.
            let headers = [
                ("Content-Type", "application/x-www-form-urlencoded;charset=UTF-8"), ("auth_token", token),
            ]
            let answers = await http.send(
                indices.map {
                    HTTPRequest(
                        url: sendURL, headers: headers, body: Array(messages[$0].formBody(authToken: token).utf8),
                        timeout: .seconds(10))
                })
            return zip(indices, answers).map { index, answer in
                switch answer {
                case .success(let response): OPPOResult(response, regID: messages[index].regID)
                case .failure(let error): OPPOResult(failure: error)
                }
            }
        }
    }
}

/// One notification to one registration id, as OPPO Push's unicast takes it: the form's
/// `message`, a JSON object `{target_type: 2, target_value, notification}`. OPPO has no
/// pass-through (透传) message on this API: every message is one the phone shows.
///
/// The notification ("通知栏消息", id=11236): its `title` (at most 50 characters) and `content`
/// (at most 200 in the standard style), what a tap does (`click_action_type` 0 the app, 2 a web
/// page, 5 an intent scheme URL, with `click_action_url`), `action_parameters` (a JSON object in
/// a string, handed to what the tap opens: Herald's keys and the producer's data), the channel it
/// goes in (`channel_id`: the app's private, "通讯与服务" channel for a service message; none, or a
/// public one, for marketing), OPPO's message class (`category`) and how loudly it is shown
/// (`notify_level`: 1 the notification bar, 2 and the lock screen, 16 and a banner, ring and
/// vibration), `off_line` and `off_line_ttl` (seconds, an hour to 10 days), a `notify_id` that makes
/// a repeated send replace it, and an `app_message_id` that makes OPPO send one message id to
/// one target once.
struct OPPOMessage: Sendable {
    var regID: String
    var title: String
    var content: String
    var tap: PayloadBuilder.Tap
    var actionParameters: String
    var channelID: String?
    var category: String
    var notifyLevel: Int
    var notifyID: Int
    var appMessageID: String
    /// Seconds.
    var ttl: Int

    static let longestTitle = 50
    static let longestContent = 200
    /// OPPO keeps a message for a phone that is off an hour at least and ten days at most
    /// (`off_line_ttl`): a notification with less than an hour left is not kept (`off_line`
    /// false), so that it is shown now or not at all, never after it expired.
    static let shortestTTL = 3600
    static let longestTTL = 10 * 86_400

    var notification: [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [
            ("app_message_id", .string(appMessageID)), ("style", .int(1)),
            ("title", .string(PayloadBuilder.shortened(title, to: Self.longestTitle))),
            ("content", .string(PayloadBuilder.shortened(content, to: Self.longestContent))),
        ]
        switch tap {
        case .openApp: fields.append(("click_action_type", .int(0)))
        case .openWeb(let url): fields += [("click_action_type", .int(2)), ("click_action_url", .string(url))]
        case .openIntent(let uri): fields += [("click_action_type", .int(5)), ("click_action_url", .string(uri))]
        }
        fields.append(("action_parameters", .string(actionParameters)))
        if let channelID { fields.append(("channel_id", .string(channelID))) }
        fields += [
            ("category", .string(category)), ("notify_level", .int(notifyLevel)), ("notify_id", .int(notifyID)),
        ]
        fields +=
            ttl < Self.shortestTTL
            ? [("off_line", .bool(false))]
            : [("off_line", .bool(true)), ("off_line_ttl", .int(min(ttl, Self.longestTTL)))]
        return fields
    }

    var messageJSON: String {
        let message = JSONValue.object([
            ("target_type", .int(2)), ("target_value", .string(regID)), ("notification", .object(notification)),
        ])
        return String(decoding: message.encodedBytes, as: UTF8.self)
    }

    func formBody(authToken: String) -> String {
        formEncoded([("auth_token", authToken), ("message", messageJSON)])
    }
}

/// OPPO Push's answer to one send: `{code, message, data: {messageId}}`, in a 200 whatever
/// became of the message; or why there was none.
struct OPPOResult: Sendable {
    var status: Int?
    var code: Int?
    var messageID: String?
    /// The answer's words, at most 300 characters, without the registration id.
    var words: String
    var retryAfter: Duration?
    var tokenError: AccessTokenError?

    init(_ response: HTTPResponse, regID: String) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        code = (object?["code"] as? NSNumber)?.intValue ?? (object?["code"] as? String).flatMap { Int($0) }
        let data = object?["data"] as? [String: Any]
        messageID = data?["messageId"] as? String ?? data?["message_id"] as? String
        let text = object?["message"] as? String ?? String(decoding: response.body.prefix(300), as: UTF8.self)
        words = String((regID.isEmpty ? text : text.replacingOccurrences(of: regID, with: "…")).prefix(300))
        retryAfter = response.retryAfter(now: Date())
    }

    init(failure: HTTPClientError) {
        words = failure.reason(sendingTo: "OPPO Push")
        status = failure.kind == .invalidRequest ? 400 : nil
    }

    init(tokenError: AccessTokenError) {
        self.tokenError = tokenError
        words = tokenError.description
    }

    // OPPO's codes (the SDK's `ReturnCode.ErrorCode`, the pages' public return codes).
    static let success = 0
    static let invalidAuthToken = 11
    /// 10000, "Invalid Registration_id" (单点推送's own code): not a live registration id.
    static let invalidRegistrationID = 10000
    /// 33, "The number of messages exceeds the daily limit": the public channel's daily quota.
    static let dailyLimit = 33
    /// -2 "Service in Flow Control", 13 "App Call Limited": the app's rate.
    static let rateLimited: Set<Int> = [-2, 13]
    /// The app's setup: 14 invalid app key, 15 missing app key, 26 IP black list, 27 access
    /// denied, 28 app disabled, 29 missing auth token, 30 API permission denied (push not opened
    /// for the app).
    static let setupRefused: Set<Int> = [14, 15, 26, 27, 28, 29, 30]

    /// What it means for the message (docs/architecture.md's table of answers).
    func outcome(untilTomorrow: Duration) -> PushOutcome {
        if let tokenError { return tokenError.outcome(scope: .oppo) }
        let said = "OPPO Push \(code.map(String.init) ?? status.map { "HTTP \($0)" } ?? "")"
        let reason = "\(said): \(words)"
        if let code {
            switch code {
            case Self.success:
                return .sent(messageName: messageID ?? "")
            case Self.invalidRegistrationID:
                return .tokenInvalid(reason: reason)
            case Self.dailyLimit:
                // Counted per day in China (UTC+8): the quota comes back at its midnight.
                return .overQuota(after: untilTomorrow, reason: reason + " (the public channel's daily limit)")
            case _ where Self.rateLimited.contains(code):
                return .overQuota(after: retryAfter ?? .seconds(1), reason: reason + " (the app's rate)")
            case Self.invalidAuthToken:
                // Refused again with a token fetched a moment ago.
                return .configurationError(
                    reason: reason + " (a fresh auth token was refused too: is the app key this app's?)", scope: .oppo)
            case _ where Self.setupRefused.contains(code):
                return .configurationError(reason: reason, scope: .oppo)
            case 12, 31, 32, 40, 41:
                // The HTTP method, a missing argument, an invalid one (a channel not the app's, a
                // title too long): this message, for good.
                return .permanentFailure(reason: reason)
            default:
                // -1, -3: OPPO's own failure; and a code Herald does not know, tried again as far
                // as the delivery's retries go rather than lost at once.
                return .retry(after: retryAfter, reason: reason)
            }
        }
        return .ofStatus(status, said: said, reason: reason, retryAfter: retryAfter, scope: .oppo)
    }
}
