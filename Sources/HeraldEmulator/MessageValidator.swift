import Foundation

/// Checks a `messages:send` body the way FCM does, for what Herald sends. Returns the
/// problem as FCM would word it, or nil when the message is acceptable.
enum MessageValidator {
    static let messageFields: Set<String> = [
        "name", "token", "topic", "condition", "fid", "data", "notification", "android", "apns", "webpush",
        "fcm_options",
    ]
    static let androidFields: Set<String> = [
        "collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options",
        "direct_boot_ok",
    ]
    static let maximumPayloadBytes = 4096
    static let maximumTopicPayloadBytes = 2048
    static let maximumTTLSeconds = 2_419_200.0

    struct Problem: Error {
        var message: String
        /// The `google.rpc.BadRequest` field, when one field is to blame.
        var field: String?
    }

    static func validate(_ body: [String: Any]) -> Problem? {
        guard let message = body["message"] as? [String: Any] else {
            return Problem(
                message: "Invalid JSON payload received. Unknown name or missing \"message\".", field: "message")
        }
        for key in body.keys where key != "message" && key != "validate_only" && key != "validateOnly" {
            return Problem(
                message: "Invalid JSON payload received. Unknown name \"\(key)\": Cannot find field.", field: nil)
        }
        for key in message.keys where !messageFields.contains(snake(key)) {
            return Problem(
                message: "Invalid JSON payload received. Unknown name \"\(key)\" at 'message': Cannot find field.",
                field: "message")
        }
        let targets = ["token", "topic", "condition", "fid"].filter { message[$0] != nil }
        guard targets.count == 1 else {
            return Problem(
                message: targets.isEmpty
                    ? "Recipient of the message is not set."
                    : "Exactly one of token, topic, condition or fid must be set.",
                field: "message")
        }
        if let topic = message["topic"] as? String, topic.hasPrefix("/topics/") {
            return Problem(message: "Topic name must not start with /topics/.", field: "message.topic")
        }
        if let problem = validateData(message["data"], at: "message.data") { return problem }
        if let android = message["android"] {
            guard let android = android as? [String: Any] else {
                return Problem(message: "android must be an object.", field: "message.android")
            }
            if let problem = validateAndroid(android) { return problem }
        }
        if let apns = message["apns"] {
            guard let apns = apns as? [String: Any] else {
                return Problem(message: "apns must be an object.", field: "message.apns")
            }
            if let problem = validateAPNS(apns) { return problem }
        }
        let limit = message["topic"] != nil ? maximumTopicPayloadBytes : maximumPayloadBytes
        let size = payloadSize(message)
        if size > limit {
            return Problem(message: "Message is too big: \(size) bytes of payload, at most \(limit).", field: nil)
        }
        return nil
    }

    static func validateData(_ data: Any?, at field: String) -> Problem? {
        guard let data else { return nil }
        guard let map = data as? [String: Any] else { return Problem(message: "\(field) must be a map.", field: field) }
        for (key, value) in map {
            guard value is String else {
                return Problem(
                    message: "Invalid value at '\(field)[\(key)].value' (TYPE_STRING): data values must be strings.",
                    field: "\(field)[\(key)].value")
            }
            let lower = key.lowercased()
            if lower == "from" || lower == "message_type" || lower.hasPrefix("google.") || lower.hasPrefix("gcm.") {
                return Problem(message: "Invalid data payload key: \(key) is reserved.", field: field)
            }
        }
        return nil
    }

    static func validateAndroid(_ android: [String: Any]) -> Problem? {
        for key in android.keys where !androidFields.contains(snake(key)) {
            return Problem(
                message:
                    "Invalid JSON payload received. Unknown name \"\(key)\" at 'message.android': Cannot find field.",
                field: "message.android")
        }
        if let priority = android["priority"] {
            guard let text = priority as? String, ["NORMAL", "HIGH"].contains(text.uppercased()) else {
                return Problem(
                    message: "Invalid value at 'message.android.priority': \(priority).",
                    field: "message.android.priority")
            }
        }
        if let ttl = android["ttl"] {
            guard let text = ttl as? String, let seconds = parseDuration(text), seconds >= 0,
                seconds <= maximumTTLSeconds
            else {
                return Problem(
                    message:
                        "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration): \(ttl)",
                    field: "message.android.ttl")
            }
        }
        if let directBootOK = android["direct_boot_ok"] ?? android["directBootOk"], !(directBootOK is Bool) {
            return Problem(
                message: "Invalid value at 'message.android.direct_boot_ok' (TYPE_BOOL): \(directBootOK)",
                field: "message.android.direct_boot_ok")
        }
        if let notification = android["notification"] as? [String: Any], let proxy = notification["proxy"] {
            let values = ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"]
            guard let text = proxy as? String, values.contains(text) else {
                return Problem(
                    message: "Invalid value at 'message.android.notification.proxy' (type.googleapis.com/"
                        + "google.firebase.fcm.v1.AndroidNotification.Proxy), \"\(proxy)\"",
                    field: "message.android.notification.proxy")
            }
        }
        return validateData(android["data"], at: "message.android.data")
    }

    static func validateAPNS(_ apns: [String: Any]) -> Problem? {
        let headers = apns["headers"] as? [String: Any] ?? [:]
        for (name, value) in headers where !(value is String) {
            return Problem(message: "apns.headers[\(name)] must be a string.", field: "message.apns.headers")
        }
        if let collapse = headers["apns-collapse-id"] as? String, collapse.utf8.count > 64 {
            return Problem(message: "apns-collapse-id is longer than 64 bytes.", field: "message.apns.headers")
        }
        let payload = apns["payload"] as? [String: Any] ?? [:]
        let aps = payload["aps"] as? [String: Any] ?? [:]
        let token = apns["live_activity_token"] ?? apns["liveActivityToken"]
        if (headers["apns-push-type"] as? String) == "liveactivity" {
            guard let token = token as? String, token.count >= 64, token.allSatisfy(\.isHexDigit) else {
                return Problem(
                    message: "A Live Activity message needs apns.live_activity_token, the activity's APNs token.",
                    field: "message.apns.live_activity_token")
            }
            if let problem = LiveActivityRules.problem(aps) {
                return Problem(message: "Invalid Live Activity payload: \(problem).", field: "message.apns.payload")
            }
        } else if token != nil {
            return Problem(
                message: "apns.live_activity_token needs apns-push-type liveactivity.", field: "message.apns.headers")
        }
        if (headers["apns-push-type"] as? String) == "background" {
            if (headers["apns-priority"] as? String) != "5" {
                return Problem(message: "A background push must have apns-priority 5.", field: "message.apns.headers")
            }
            let allowed: Set<String> = ["content-available"]
            if aps.keys.contains(where: { !allowed.contains($0) }) || (aps["content-available"] as? Int) != 1 {
                return Problem(
                    message: "A background push's aps may hold only content-available: 1.",
                    field: "message.apns.payload")
            }
        }
        return nil
    }

    /// Bytes of what the device receives: data, notification and the APNs payload.
    static func payloadSize(_ message: [String: Any]) -> Int {
        var size = 0
        for key in ["data", "notification"] {
            if let value = message[key], let data = try? JSONSerialization.data(withJSONObject: value) {
                size += data.count
            }
        }
        if let android = message["android"] as? [String: Any], let data = android["data"],
            let encoded = try? JSONSerialization.data(withJSONObject: data)
        {
            size += encoded.count
        }
        if let apns = message["apns"] as? [String: Any], let payload = apns["payload"],
            let encoded = try? JSONSerialization.data(withJSONObject: payload)
        {
            size = max(size, encoded.count)
        }
        return size
    }

    /// A protobuf Duration string: `"3600s"`, `"3.5s"`.
    static func parseDuration(_ text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard !number.isEmpty, parts.count <= 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }),
            parts.count == 1 || parts[1].count <= 9
        else { return nil }
        return Double(number)
    }

    /// Proto JSON accepts lowerCamelCase as well as snake_case.
    static func snake(_ key: String) -> String {
        var result = ""
        for character in key {
            if character.isUppercase {
                result += "_" + character.lowercased()
            } else {
                result.append(character)
            }
        }
        return result
    }
}
