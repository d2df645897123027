import Foundation
import HeraldCrypto

/// A notification OPPO Push's stand-in accepted.
public struct ReceivedOPPOMessage: Sendable {
    /// The message id it answered (`data.messageId`).
    public var messageID: String
    /// The app key whose auth token sent it.
    public var appKey: String
    /// The form's `message` as JSON text.
    public var json: String

    /// The form's `message`, parsed.
    public var message: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    public var regID: String { message["target_value"] as? String ?? "" }
    public var notification: [String: Any] { message["notification"] as? [String: Any] ?? [:] }

    /// `notification.action_parameters`: a JSON object in a string, as the app reads it from the
    /// intent a tap opens.
    public var parameters: [String: String] {
        guard let text = notification["action_parameters"] as? String else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]) ?? [:]
    }
}

/// A stand-in for OPPO Push's server API, strict about what OPPO documents (its open platform's
/// "鉴权" developmentDoc id=11234, "单点推送" id=11235, "通知栏消息" id=11236, the public return
/// codes, "消息分类"; and OPPO's server SDK for Java, opush-server-sdk 1.1.0, where they differ):
///
/// - `POST /server/v1/auth` takes a form of a registered app's `app_key` (else 15 missing, 14
///   invalid), `timestamp` in milliseconds within ten minutes of now (18, 19) and `sign`, the hex
///   SHA-256 of app key, timestamp and master secret (17, 16), and answers `{code: 0, message,
///   data: {auth_token, create_time}}`; the token lasts 24 hours.
/// - `POST /server/v1/message/notification/unicast` takes a form (41 otherwise) with an
///   `auth_token` (29 missing, 11 invalid or expired; in the form, as the SDK sends it, or a
///   header, as OPPO's newer pages put it) and `message`, a JSON object of only `target_type` 2
///   (a registration id), `target_value` (the SDK's shape of one, else 10000),
///   `verify_registration_id` and `notification` (40, 41): only OPPO's notification fields, a
///   `title` of 1 to 50 characters and a `content` of 1 to 200 (style 1), `style` 1 to 5,
///   `click_action_type` 0, 1 or 4 with `click_action_activity`, 2 with an http(s)
///   `click_action_url`, or 5 with one (at most 500 characters), `action_parameters` a JSON
///   object in a string, `off_line_ttl` an hour to 10 days, `notify_id` an integer, `category`
///   one of OPPO's
///   (service: IM, ACCOUNT, DEVICE_REMINDER, ORDER, TODO, SUBSCRIPTION; marketing: MARKETING,
///   NEWS, CONTENT, SOCIAL), `notify_level` 1, 2 or 16, and a `channel_id` the app registered
///   (a marketing category is refused in a private channel: Herald's reading of OPPO's rule that
///   the private channel carries only 通讯与服务 messages). A send through the public channel
///   counts against the app's daily limit (33 once over it, when one is set). It answers
///   `{code: 0, message, data: {messageId}}`, or `{code, message}`, in a 200, or the error
///   injected for the registration id (``EmulatorBehaviour``).
actor OPPOService {
    struct App {
        var masterSecret: String
        /// Its registered channels, each `true` when private.
        var channels: [String: Bool]
        var publicDailyLimit: Int?
        var publicSentToday = 0
    }

    private var apps: [String: App] = [:]
    private var authTokens: [String: (appKey: String, expires: Date)] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedOPPOMessage] = []
    private(set) var authRequests = 0
    private var nextID = 1

    func registerApp(appKey: String, masterSecret: String, channels: [String: Bool], publicDailyLimit: Int?) {
        apps[appKey] = App(masterSecret: masterSecret, channels: channels, publicDailyLimit: publicDailyLimit)
    }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func expireAuthTokens() {
        for token in authTokens.keys { authTokens[token]?.expires = .distantPast }
    }

    static func answer(_ code: Int, _ words: String) -> String {
        #"{"code":\#(code),"message":\#(EmulatorRouter.quote(words))}"#
    }

    func authenticate(form body: Data, now: Date = Date()) -> String {
        authRequests += 1
        let fields = XiaomiService.form(body) ?? [:]
        guard let appKey = fields["app_key"], !appKey.isEmpty else { return Self.answer(15, "Missing App Key") }
        guard let app = apps[appKey] else { return Self.answer(14, "Invalid App Key") }
        guard let sign = fields["sign"], !sign.isEmpty else { return Self.answer(17, "Missing Signature") }
        guard let text = fields["timestamp"], !text.isEmpty else { return Self.answer(18, "Missing Timestamp") }
        guard let timestamp = Int64(text), abs(Double(timestamp) / 1000 - now.timeIntervalSince1970) <= 600 else {
            return Self.answer(19, "Invalid Timestamp")
        }
        let expected = Digest.hex(Digest.sha256(Array("\(appKey)\(text)\(app.masterSecret)".utf8)))
        guard sign == expected else { return Self.answer(16, "Invalid Signature") }
        let token = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        authTokens[token] = (appKey, now.addingTimeInterval(86_400))
        let created = Int64(now.timeIntervalSince1970 * 1000)
        return #"{"code":0,"message":"Success","data":{"auth_token":"\#(token)","create_time":\#(created)}}"#
    }

    func send(headers: [String: String], body: Data) -> (json: String, delay: Duration?, retryAfter: Int?) {
        guard headers["content-type"]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true,
            let fields = XiaomiService.form(body)
        else { return (Self.answer(41, "Invalid Arguments: a form (application/x-www-form-urlencoded)"), nil, nil) }
        let token = fields["auth_token"] ?? headers["auth_token"]
        guard let token, !token.isEmpty else { return (Self.answer(29, "Missing Auth Token"), nil, nil) }
        if let header = headers["auth_token"], header != token {
            return (Self.answer(11, "Invalid Auth Token"), nil, nil)
        }
        guard let grant = authTokens[token], grant.expires > Date(), var app = apps[grant.appKey] else {
            return (Self.answer(11, "Invalid Auth Token"), nil, nil)
        }
        guard let text = fields["message"] else {
            return (Self.answer(40, "Missing Required Arguments: message"), nil, nil)
        }
        guard let message = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            return (Self.answer(41, "Invalid Arguments: message is a JSON object"), nil, nil)
        }
        if let problem = Self.problem(in: message, channels: app.channels) {
            return (Self.answer(problem.code, problem.words), nil, nil)
        }
        let regID = message["target_value"] as? String ?? ""
        var delay: Duration?
        if let entry = behaviours[regID] {
            if let remaining = entry.remaining {
                behaviours[regID] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
            }
            switch entry.behaviour {
            case .slow(let milliseconds): delay = .milliseconds(milliseconds)
            case .unregistered, .unregisteredSince, .gone, .invalidToken:
                return (Self.answer(10000, "Invalid Registration_id"), nil, nil)
            case .senderIDMismatch, .thirdPartyAuthError: return (Self.answer(30, "API Permission Denied"), nil, nil)
            case .expiredProviderToken: return (Self.answer(11, "Invalid Auth Token"), nil, nil)
            case .quotaExceeded:
                return (Self.answer(33, "The number of messages exceeds the daily limit"), nil, nil)
            case .unavailable(let retryAfter): return (Self.answer(-2, "Service in Flow Control"), nil, retryAfter)
            case .internalError: return (Self.answer(-1, "Service Currently Unavailable"), nil, nil)
            case .invalidMessage, .payloadTooLarge: return (Self.answer(41, "Invalid Arguments"), nil, nil)
            case .garbledAnswer: return (Self.answer(41, "Invalid \u{0}Arguments\u{7}\u{1B}[31m"), nil, nil)
            }
        }
        let notification = message["notification"] as? [String: Any] ?? [:]
        let isPrivate = (notification["channel_id"] as? String).flatMap { app.channels[$0] } ?? false
        if !isPrivate {
            if let limit = app.publicDailyLimit, app.publicSentToday >= limit {
                return (Self.answer(33, "The number of messages exceeds the daily limit"), nil, nil)
            }
            app.publicSentToday += 1
            apps[grant.appKey] = app
        }
        let id = "ZngnvJIM7wQusNtbqYnpH6XX-1-1-\(String(format: "%024x", nextID))"
        nextID += 1
        received.append(ReceivedOPPOMessage(messageID: id, appKey: grant.appKey, json: text))
        return (#"{"code":0,"message":"Success","data":{"messageId":"\#(id)"}}"#, delay, nil)
    }

    static let serviceCategories: Set<String> = ["IM", "ACCOUNT", "DEVICE_REMINDER", "ORDER", "TODO", "SUBSCRIPTION"]
    static let marketingCategories: Set<String> = ["MARKETING", "NEWS", "CONTENT", "SOCIAL"]
    static let notificationFields: Set<String> = [
        "app_message_id", "style", "big_picture_id", "small_picture_id", "title", "sub_title", "content",
        "click_action_type", "click_action_activity", "click_action_url", "action_parameters", "show_time_type",
        "show_start_time", "show_end_time", "off_line", "off_line_ttl", "push_time_type", "push_start_time",
        "time_zone", "fix_speed", "fix_speed_rate", "network_type", "call_back_url", "call_back_parameter",
        "channel_id", "show_ttl", "notify_id", "category", "notify_level", "badge_message_count",
        "badge_operation_type",
    ]

    /// What OPPO Push refuses in a unicast `message`, with its code.
    static func problem(in message: [String: Any], channels: [String: Bool]) -> (code: Int, words: String)? {
        let members: Set<String> = ["target_type", "target_value", "notification", "verify_registration_id"]
        if let unknown = Set(message.keys).subtracting(members).first {
            return (41, "Invalid Arguments: unknown member \(unknown)")
        }
        guard message["target_type"] as? Int == 2 else { return (41, "target_type is 2 (a registration id)") }
        guard let regID = message["target_value"] as? String else { return (40, "target_value is required") }
        let shape = #"^((([0-9A-Za-z]{2,10})_)?(.*)_)?[0-9a-fA-F]{32}$|^[0-9a-fA-F]{24}$"#
        guard regID.range(of: shape, options: .regularExpression) != nil else {
            return (10000, "Invalid Registration_id")
        }
        guard let notification = message["notification"] as? [String: Any] else {
            return (40, "notification (a JSON object) is required")
        }
        if let unknown = Set(notification.keys).subtracting(notificationFields).first {
            return (41, "Invalid Arguments: unknown member notification.\(unknown)")
        }
        let title = notification["title"] as? String ?? "", content = notification["content"] as? String ?? ""
        guard !title.isEmpty, !content.isEmpty else { return (40, "title and content are required") }
        let style = notification["style"] as? Int ?? 1
        guard (1...5).contains(style) else { return (41, "style is 1 to 5") }
        guard title.count <= 50, content.count <= (style == 1 ? 200 : 128) else {
            return (41, "title is at most 50 characters, content at most 200 (style 1)")
        }
        let activity = notification["click_action_activity"] as? String ?? ""
        let url = notification["click_action_url"] as? String ?? ""
        switch notification["click_action_type"] as? Int ?? 0 {
        case 0: break
        case 1 where !activity.isEmpty, 4 where !activity.isEmpty: break
        case 2 where url.hasPrefix("https://") || url.hasPrefix("http://"): break
        case 5 where !url.isEmpty: break
        default:
            return (41, "click_action_type is 0, 1 or 4 with click_action_activity, 2 with an http(s) URL, 5 with one")
        }
        if let parameters = notification["action_parameters"] {
            guard let text = parameters as? String,
                (try? JSONSerialization.jsonObject(with: Data(text.utf8))) is [String: Any]
            else { return (41, "action_parameters is a JSON object in a string") }
        }
        if let ttl = notification["off_line_ttl"], !(3600...864_000).contains(ttl as? Int ?? 0) {
            return (41, "off_line_ttl is an hour to 10 days")
        }
        if url.count > 500 { return (41, "click_action_url is at most 500 characters") }
        if let id = notification["notify_id"], !(id is Int) { return (41, "notify_id is an integer") }
        if let level = notification["notify_level"], ![1, 2, 16].contains(level as? Int ?? 0) {
            return (41, "notify_level is 1, 2 or 16")
        }
        let category = notification["category"] as? String
        if let category, !serviceCategories.contains(category), !marketingCategories.contains(category) {
            return (41, "category \(category) is not one of OPPO's")
        }
        if let channel = notification["channel_id"] {
            guard let channel = channel as? String, let isPrivate = channels[channel] else {
                return (41, "channel_id \(notification["channel_id"] ?? "") is not a channel of the app")
            }
            if isPrivate, let category, marketingCategories.contains(category) {
                return (41, "a \(category) message in the private channel \(channel)")
            }
        }
        return nil
    }
}

extension OPPOService: EmulatedService {
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let oppo = self
        router.add("POST /server/v1/auth") { request in
            EmulatorRouter.json(200, await oppo.authenticate(form: request.body))
        }
        router.add("POST /server/v1/message/notification/unicast") { request in
            let (json, delay, retryAfter) = await oppo.send(headers: request.headers, body: request.body)
            return try await EmulatorRouter.json(200, json, after: delay, retryAfter: retryAfter)
        }
        router.add("POST /emulator/oppo-apps") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let key = object["app_key"] as? String, let secret = object["master_secret"] as? String else {
                return EmulatorRouter.json(400, #"{"error":"expected {\"app_key\": …, \"master_secret\": …}"}"#)
            }
            let channels = (object["channels"] as? [String: String] ?? [:]).mapValues { $0 == "private" }
            await oppo.registerApp(
                appKey: key, masterSecret: secret, channels: channels,
                publicDailyLimit: object["public_daily_limit"] as? Int)
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/oppo") { _ in
            let list = await oppo.received.map {
                "{\"id\":\(EmulatorRouter.quote($0.messageID)),\"app_key\":\(EmulatorRouter.quote($0.appKey)),\"message\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}

extension Emulator {
    /// Trusts an OPPO app's AppKey and MasterSecret, with the channels it registered (each
    /// `true` when private, for service messages) and, when given, its public channel's daily
    /// limit.
    public func registerOPPOApp(
        appKey: String, masterSecret: String, channels: [String: Bool] = [:], publicDailyLimit: Int? = nil
    ) async {
        await routes.oppo.registerApp(
            appKey: appKey, masterSecret: masterSecret, channels: channels, publicDailyLimit: publicDailyLimit)
    }

    /// The notifications OPPO Push's stand-in accepted, and the auth requests it took.
    public var oppoReceived: [ReceivedOPPOMessage] { get async { await routes.oppo.received } }
    public var oppoAuthRequests: Int { get async { await routes.oppo.authRequests } }

    /// Expires every OPPO auth token issued so far (the next send with one gets 11).
    public func expireOPPOAuthTokens() async { await routes.oppo.expireAuthTokens() }
}
