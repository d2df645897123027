import Foundation
import HeraldHTTP

/// A message Xiaomi Mi Push's stand-in accepted: its form's fields.
public struct ReceivedMiPushMessage: Sendable {
    /// The message id it answered (`data.id`).
    public var messageID: String
    public var fields: [String: String]

    public var regID: String { fields["registration_id"] ?? "" }
    /// The payload, a JSON object of strings, as the app's `PushMessageReceiver` reads it.
    public var payload: [String: String] {
        (try? JSONSerialization.jsonObject(with: Data((fields["payload"] ?? "").utf8)) as? [String: String]) ?? [:]
    }
}

/// A stand-in for Xiaomi Mi Push's server API, strict about what Xiaomi documents
/// ("服务器API地址以及参数", dev.mi.com pId=1559; "服务端错误码参考", pId=1560; "推送消息限制说明",
/// pId=1656):
///
/// - `POST /v3/message/regid` takes a form (`application/x-www-form-urlencoded`) with
///   `Authorization: key=<AppSecret>` of a registered app ("key" in lower case; else 21301), its
///   `restricted_package_name` (else 22022), one to 1000 comma-separated `registration_id`s,
///   `pass_through` 0 or 1, and only Mi Push's fields (10017). A notification message
///   (`pass_through=0`) needs a `title` under 50 characters and a `description` under 128, neither
///   blank (65011, 10017), and `extra.notify_effect` (required since 2024-09-30: 1, 2 with
///   `extra.intent_uri`, or 3 with `extra.web_uri`); a `notify_id` is 0 to 2³¹−1, a
///   `time_to_live` milliseconds, an `extra.channel_id` one of the app's registered channels
///   (27001); at most 10 custom `extra.` keys (65014); a payload over 4096 bytes is too long
///   (65009: Xiaomi documents the code, not the size, which is FCM's). It answers Mi Push's
///   `{result, trace_id, code, data: {id}, description, info}`, or its error
///   `{result: "error", reason, code, description}`, in a 200, or the error injected for the
///   regId (``EmulatorBehaviour``).
actor XiaomiService {
    struct App {
        var secret: String
        /// Its registered channels, and whether each is private (service) or public.
        var channels: [String: Bool]
    }

    /// Registered apps, by package name.
    private var apps: [String: App] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedMiPushMessage] = []
    private var nextID = 1

    func registerApp(packageName: String, secret: String, channels: [String: Bool]) {
        apps[packageName] = App(secret: secret, channels: channels)
    }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    static let fields: Set<String> = [
        "registration_id", "restricted_package_name", "pass_through", "title", "description", "payload", "notify_type",
        "notify_id", "time_to_live", "time_to_send",
    ]
    static let documentedExtras: Set<String> = [
        "extra.notify_effect", "extra.intent_uri", "extra.web_uri", "extra.channel_id", "extra.sound_uri",
        "extra.notify_foreground", "extra.only_send_once", "extra.callback", "extra.callback.param",
        "extra.callback.type", "extra.jobkey", "extra.template_id", "extra.template_param",
    ]

    func send(authorization: String?, contentType: String?, body: Data) -> (answer: MiPushAnswer, delay: Duration?) {
        guard contentType?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            return (.error(10017, "Content-Type must be application/x-www-form-urlencoded"), nil)
        }
        guard let fields = Self.form(body) else { return (.error(10017, "the form cannot be read"), nil) }
        guard let authorization, authorization.hasPrefix("key="),
            let app = apps.first(where: { $0.value.secret == authorization.dropFirst(4) })
        else { return (.error(21301, "Invalid application secret."), nil) }
        guard fields["restricted_package_name"] == app.key else {
            return (.error(22022, "Invalid package name: \(fields["restricted_package_name"] ?? "")"), nil)
        }
        if let problem = Self.problem(in: fields, channels: app.value.channels) { return (problem, nil) }
        let regIDs = (fields["registration_id"] ?? "").split(separator: ",").map(String.init)
        if let regID = regIDs.first, let injected = injected(for: regID) {
            if case .slow(let milliseconds) = injected { return (accept(fields), .milliseconds(milliseconds)) }
            return (Self.answer(injected), nil)
        }
        return (accept(fields), nil)
    }

    private func accept(_ fields: [String: String]) -> MiPushAnswer {
        let id = "scm\(Int64(Date().timeIntervalSince1970 * 1000))\(nextID)Xs"
        nextID += 1
        received.append(ReceivedMiPushMessage(messageID: id, fields: fields))
        return .success(id)
    }

    /// What Mi Push refuses in a message, with its error code.
    static func problem(in fields: [String: String], channels: [String: Bool]) -> MiPushAnswer? {
        if let unknown = fields.keys.first(where: { !Self.fields.contains($0) && !$0.hasPrefix("extra.") }) {
            return .error(10017, "Illegal parameter: \(unknown)")
        }
        let regIDs = (fields["registration_id"] ?? "").split(separator: ",", omittingEmptySubsequences: false)
        guard (1...1000).contains(regIDs.count), regIDs.allSatisfy({ !$0.isEmpty }) else {
            return .error(10016, "registration_id: one to 1000 regIds, comma-separated")
        }
        guard let passThrough = fields["pass_through"], ["0", "1"].contains(passThrough) else {
            return .error(10017, "pass_through must be 0 or 1")
        }
        if passThrough == "0" {
            let title = fields["title"] ?? "", description = fields["description"] ?? ""
            guard !title.allSatisfy(\.isWhitespace), !description.allSatisfy(\.isWhitespace) else {
                return .error(65011, "Title or Description is empty!")
            }
            guard title.count < 50, description.count < 128 else {
                return .error(10017, "title must be under 50 characters and description under 128")
            }
            switch fields["extra.notify_effect"] {
            case "1": break
            case "2" where fields["extra.intent_uri"] != nil: break
            case "3" where (fields["extra.web_uri"] ?? "").hasPrefix("http"): break
            default:
                return .error(10017, "extra.notify_effect must be 1, 2 with extra.intent_uri, or 3 with extra.web_uri")
            }
        }
        if let id = fields["notify_id"], Int32(id).map({ $0 >= 0 }) != true {
            return .error(10017, "notify_id must be 0 to 2147483647")
        }
        if let ttl = fields["time_to_live"], Int64(ttl).map({ $0 >= 0 }) != true {
            return .error(10017, "time_to_live is milliseconds")
        }
        if let type = fields["notify_type"], Int(type) == nil { return .error(10017, "notify_type is a number") }
        if let channel = fields["extra.channel_id"], channels[channel] == nil {
            return .error(27001, "channel相关信息不匹配: \(channel) is not a channel of the app")
        }
        if fields.keys.filter({ $0.hasPrefix("extra.") && !documentedExtras.contains($0) }).count > 10 {
            return .error(65014, "键值对数目太多: at most 10 custom extras")
        }
        if (fields["payload"] ?? "").utf8.count > 4096 { return .error(65009, "消息内容太长") }
        // A receipt's callback: a URL of at most 128 bytes, a parameter of at most 64, a type that
        // is a sum of the receipts' (1, 2, 16, 32, 64, 128).
        if let url = fields["extra.callback"], !url.hasPrefix("http") || url.utf8.count > 128 {
            return .error(10017, "extra.callback is an http(s) URL of at most 128 bytes")
        }
        if let param = fields["extra.callback.param"], param.utf8.count > 64 {
            return .error(10017, "extra.callback.param is at most 64 bytes")
        }
        if let type = fields["extra.callback.type"], Int(type).map({ (1...255).contains($0) }) != true {
            return .error(10017, "extra.callback.type is a sum of 1, 2, 16, 32, 64 and 128")
        }
        return nil
    }

    /// The error injected for `regID`, counted down.
    private func injected(for regID: String) -> EmulatorBehaviour? {
        guard let entry = behaviours[regID] else { return nil }
        if let remaining = entry.remaining {
            behaviours[regID] = remaining > 1 ? (entry.behaviour, remaining - 1) : nil
        }
        return entry.behaviour
    }

    static func answer(_ behaviour: EmulatorBehaviour) -> MiPushAnswer {
        switch behaviour {
        case .unregistered, .unregisteredSince, .gone, .invalidToken: .error(20301, "No valid targets!")
        case .senderIDMismatch, .thirdPartyAuthError, .expiredProviderToken:
            .error(21301, "Invalid application secret.")
        case .quotaExceeded: .error(200001, "exceed quota, quota: 10000, have acked: 10000")
        case .unavailable: .error(10027, "应用的API调用太频繁")
        case .internalError: .error(10002, "系统繁忙")
        case .invalidMessage, .payloadTooLarge: .error(65009, "消息内容太长")
        case .garbledAnswer: .error(10017, "Illegal \u{0}parameter\u{7}\u{1B}[31m")
        case .slow: .error(10002, "系统繁忙")
        }
    }

    /// A form's fields; nil when it is not one.
    static func form(_ body: Data) -> [String: String]? {
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard parts.count == 2, let name = parts[0], let value = parts[1] else { return nil }
            fields[name] = value
        }
        return fields
    }
}

/// An answer of Mi Push's server API: a 200 whatever became of the message.
enum MiPushAnswer {
    case success(String)
    case error(Int, String)

    var json: String {
        switch self {
        case .success(let id):
            #"{"result":"ok","trace_id":"Xcm\#(id.dropFirst(3))","code":0,"data":{"id":"\#(id)"},"description":"成功","info":"Received push messages for 1 REGID"}"#
        case .error(let code, let reason):
            #"{"result":"error","reason":\#(EmulatorRouter.quote(reason)),"trace_id":"Xcm0","code":\#(code),"description":"发送消息失败"}"#
        }
    }
}

extension XiaomiService: EmulatedService {
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let xiaomi = self
        router.add("POST /v3/message/regid") { request in
            let (answer, delay) = await xiaomi.send(
                authorization: request.headers["authorization"], contentType: request.headers["content-type"],
                body: request.body)
            return try await EmulatorRouter.json(200, answer.json, after: delay, retryAfter: nil)
        }
        router.add("GET /emulator/xiaomi") { _ in
            let list = await xiaomi.received.map { message in
                let fields = message.fields.sorted { $0.key < $1.key }.map {
                    "\(EmulatorRouter.quote($0.key)):\(EmulatorRouter.quote($0.value))"
                }
                return
                    "{\"id\":\(EmulatorRouter.quote(message.messageID)),\"fields\":{\(fields.joined(separator: ","))}}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
        router.add("POST /emulator/xiaomi-apps") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let package = object["package_name"] as? String, let secret = object["app_secret"] as? String else {
                return EmulatorRouter.json(400, #"{"error":"expected {\"package_name\": …, \"app_secret\": …}"}"#)
            }
            let channels = (object["channels"] as? [String: String] ?? [:]).mapValues { $0 == "private" }
            await xiaomi.registerApp(packageName: package, secret: secret, channels: channels)
            return EmulatorRouter.json(200, "{}")
        }
    }
}

extension Emulator {
    /// Trusts a Xiaomi app's AppSecret for its package name, with the channels it registered
    /// (each `true` when private, for service messages).
    public func registerXiaomiApp(packageName: String, secret: String, channels: [String: Bool] = [:]) async {
        await routes.xiaomi.registerApp(packageName: packageName, secret: secret, channels: channels)
    }

    /// The messages Mi Push's stand-in accepted.
    public var xiaomiReceived: [ReceivedMiPushMessage] { get async { await routes.xiaomi.received } }

    /// The post of Mi Push's receipts, to `url`, for each message the stand-in took that named a
    /// callback, as Mi Push posts them: a form whose `data` is JSON keyed by message id, each
    /// `{param, type, targets, jobkey, barStatus, timestamp}`, of type 1 (delivered) unless `types`
    /// gives its regId another, at `at`; `barOff` marks a phone whose notifications are off.
    public func miPushReceipts(to url: String, types: [String: Int] = [:], barOff: Set<String> = [], at: Date) async
        -> HTTPRequest
    {
        let millis = Int64((at.timeIntervalSince1970 * 1000).rounded())
        var messages: [String: Any] = [:]
        for message in await xiaomiReceived {
            guard let param = message.fields["extra.callback.param"] else { continue }
            let type = types[message.regID] ?? 1
            var entry: [String: Any] = [
                "param": param, "type": type, "targets": message.regID, "jobkey": "",
                "barStatus": barOff.contains(message.regID) ? "Disable" : "Enable", "timestamp": millis,
            ]
            if type == 16 { entry["errorCode"] = 1 }
            messages[message.messageID] = entry
        }
        let json = (try? JSONSerialization.data(withJSONObject: messages, options: [.sortedKeys])) ?? Data("{}".utf8)
        let data =
            String(decoding: json, as: UTF8.self)
            .addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~")))
            ?? ""
        return HTTPRequest(
            method: "POST", url: url, headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: [UInt8]("data=\(data)".utf8))
    }
}
