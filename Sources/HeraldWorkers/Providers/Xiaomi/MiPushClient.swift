import Foundation
import HeraldCore
import HeraldHTTP

extension ConfigurationScope {
    /// An app's Xiaomi Mi Push setup (`herald.app_xiaomi`).
    static let xiaomi: Self = "xiaomi"
}

/// Sends messages to Xiaomi phones (MIUI, HyperOS) through Mi Push's server API
/// (`POST /v3/message/regid`, one regId a request, form-encoded, `Authorization: key=<AppSecret>`),
/// and reads each answer into a typed outcome (``MiPushResult``). It knows no database: what
/// Herald keeps is the route's.
struct MiPushClient: Sendable {
    /// Mi Push's hosts: a phone outside mainland China is reached only through its region's.
    enum Region: String, Sendable, Decodable {
        case china, singapore, europe, russia, india

        var host: String {
            switch self {
            case .china: "https://api.xmpush.xiaomi.com"
            case .singapore: "https://sgp-api.xmpush.global.xiaomi.com"
            case .europe: "https://fr-api.xmpush.global.xiaomi.com"
            case .russia: "https://ru-api.xmpush.global.xiaomi.com"
            case .india: "https://idmb-api.xmpush.global.xiaomi.com"
            }
        }
    }

    let appSecret: String
    let http: HTTPClient
    let sendURL: String

    /// `endpoint`, a stand-in's base URL, replaces the region's host.
    init(appSecret: String, region: Region, endpoint: String?, http: HTTPClient) {
        self.appSecret = appSecret
        self.http = http
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? region.host
        sendURL = base + "/v3/message/regid"
    }

    /// Sends each message (a request each, at once); the answers come in the same order.
    func send(_ messages: [MiPushMessage]) async -> [MiPushResult] {
        let headers = [
            ("Authorization", "key=\(appSecret)"), ("Content-Type", "application/x-www-form-urlencoded;charset=UTF-8"),
        ]
        let answers = await http.send(
            messages.map {
                HTTPRequest(url: sendURL, headers: headers, body: Array($0.formBody.utf8), timeout: .seconds(10))
            })
        return zip(messages, answers).map { message, answer in
            switch answer {
            case .success(let response): MiPushResult(response, regID: message.regID)
            case .failure(let error): MiPushResult(failure: error)
            }
        }
    }
}

/// One message to one regId, as Mi Push's v3 API takes it. A notification message
/// (`pass_through=0`) is shown by the phone: its `title` and `description` (Mi Push takes under
/// 50 and 128 characters), what a tap does (`extra.notify_effect`, which Mi Push requires since
/// 2024-09-30: the app, an intent URI, or a web page) and the notification class it goes in
/// (`extra.channel_id`, a channel the app registered with Xiaomi as private or public); the
/// `payload`, Herald's keys and the producer's data as one JSON object, reaches the app's
/// `PushMessageReceiver` when the notification arrives and when it is tapped. A pass-through
/// message (`pass_through=1`) shows nothing and hands the app the payload.
struct MiPushMessage: Sendable {
    var regID: String
    var packageName: String
    /// Nil: a pass-through message.
    var shown: (title: String, description: String, tap: PayloadBuilder.Tap, channelID: String?)?
    var payload: String
    var notifyID: Int
    var ttlMilliseconds: Int
    /// Where Mi Push posts its receipts (`extra.callback`), and what it echoes in each
    /// (`extra.callback.param`: the delivery's report reference); nil: no receipts.
    var receipt: (url: String, param: String)?

    static let longestTitle = 49
    static let longestDescription = 127

    var formBody: String {
        var fields: [(String, String)] = [
            ("registration_id", regID), ("restricted_package_name", packageName),
            ("pass_through", shown == nil ? "1" : "0"), ("payload", payload),
            ("time_to_live", "\(ttlMilliseconds)"),
        ]
        if let shown {
            fields += [
                ("title", PayloadBuilder.shortened(shown.title, to: Self.longestTitle)),
                ("description", PayloadBuilder.shortened(shown.description, to: Self.longestDescription)),
                ("notify_type", "-1"), ("notify_id", "\(notifyID)"),
            ]
            switch shown.tap {
            case .openApp: fields.append(("extra.notify_effect", "1"))
            case .openIntent(let uri): fields += [("extra.notify_effect", "2"), ("extra.intent_uri", uri)]
            case .openWeb(let url): fields += [("extra.notify_effect", "3"), ("extra.web_uri", url)]
            }
            if let channel = shown.channelID { fields.append(("extra.channel_id", channel)) }
        }
        if let receipt {
            fields += [
                ("extra.callback", receipt.url), ("extra.callback.param", receipt.param),
                ("extra.callback.type", "\(MiPushReceipts.types)"),
            ]
        }
        return formEncoded(fields)
    }
}

/// Mi Push's answer to one send: `{result, code, data: {id}, reason, description, trace_id}`, in
/// a 200 whatever became of the message; or why there was none.
struct MiPushResult: Sendable {
    var status: Int?
    var code: Int?
    var messageID: String?
    /// `reason` (an error's words) or `description`, at most 300 characters, the regId left out.
    var words: String
    var retryAfter: Duration?

    init(_ response: HTTPResponse, regID: String) {
        status = response.status
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        code = (object?["code"] as? NSNumber)?.intValue
        messageID = (object?["data"] as? [String: Any])?["id"] as? String
        let text =
            object?["reason"] as? String ?? object?["description"] as? String
            ?? String(decoding: response.body.prefix(300), as: UTF8.self)
        words = String((regID.isEmpty ? text : text.replacingOccurrences(of: regID, with: "…")).prefix(300))
        retryAfter = response.retryAfter(now: Date())
    }

    init(failure: HTTPClientError) {
        words = failure.reason(sendingTo: "Xiaomi Mi Push")
        status = failure.kind == .invalidRequest ? 400 : nil
    }

    static let success = 0
    /// 20301, "No valid targets!": the regId is not a live device of the app, or of the app whose
    /// secret this is.
    static let noValidTargets = 20301
    /// 200001, the app's daily quota of public (and default-class) messages; 10034, too many
    /// messages today.
    static let dailyQuota: Set<Int> = [200_001, 10034]

    /// What it means for the message (Mi Push's error codes, in docs/architecture.md's table of
    /// answers). `noValidTargets` is the outcome of 20301, decided by the caller (a dead regId
    /// once the secret is known to be the app's).
    func outcome(untilTomorrow: Duration) -> PushOutcome {
        let said = "Xiaomi Mi Push \(code.map(String.init) ?? status.map { "HTTP \($0)" } ?? "")"
        let reason = "\(said): \(words)"
        if let code {
            switch code {
            case Self.success:
                return .sent(messageName: messageID ?? "")
            case Self.noValidTargets:
                return .tokenInvalid(reason: reason)
            case _ where Self.dailyQuota.contains(code):
                // Counted per day in China (UTC+8): the quota comes back at its midnight.
                return .overQuota(after: untilTomorrow, reason: reason + " (the app's daily quota)")
            case 10027, 10022, 10023, 10024:
                // Calls too frequent: the app's rate (QPS), not this message's fault.
                return .overQuota(after: retryAfter ?? .seconds(1), reason: reason + " (the app's rate)")
            case 21301, 21302, 21303, 22000, 22006, 22007, 22008, 22022, 27001, 10031, 26006:
                // The secret, the package name, a channel not the app's, an app Xiaomi blocked or
                // holds for review: the app's setup.
                return .configurationError(reason: reason, scope: .xiaomi)
            case 10008, 10016, 10017, 10018, 65009, 65011, 65014, 65015:
                // Parameters, too long, empty, the extras, the request's length: this message,
                // for good.
                return .permanentFailure(reason: reason)
            default:
                // 1, -1, 10001 to 10003: Mi Push's own failure; and a code Herald does not know,
                // tried again as far as the delivery's retries go rather than lost at once.
                return .retry(after: retryAfter, reason: reason)
            }
        }
        return .ofStatus(status, said: said, reason: reason, retryAfter: retryAfter, scope: .xiaomi)
    }
}
