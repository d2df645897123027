import HeraldCore
import HeraldCrypto

/// An FCM HTTP v1 message (`projects.messages`), with the fields Herald sends.
public struct FCMMessage: Sendable, Equatable {
    public enum Target: Sendable, Equatable {
        /// An FCM registration token.
        case token(String)
        /// A topic name, without the `/topics/` prefix.
        case topic(String)
        /// A condition such as `'a' in topics && 'b' in topics`.
        case condition(String)
        /// A Firebase Installation ID.
        case fid(String)
    }

    public struct Notification: Sendable, Equatable {
        public var title: String?
        public var body: String?
        public var image: String?
        public init(title: String? = nil, body: String? = nil, image: String? = nil) {
            self.title = title
            self.body = body
            self.image = image
        }
    }

    public struct Android: Sendable, Equatable {
        public enum Priority: String, Sendable { case normal = "NORMAL", high = "HIGH" }
        public var priority: Priority?
        /// How long FCM keeps the message for an offline device (0 to 28 days).
        public var ttl: Duration?
        public var collapseKey: String?
        public var restrictedPackageName: String?
        public var directBootOK: Bool?
        /// Android notification options (`channel_id`, …), for notification messages only.
        public var notification: JSONValue?
        public init(
            priority: Priority? = nil, ttl: Duration? = nil, collapseKey: String? = nil,
            restrictedPackageName: String? = nil, directBootOK: Bool? = nil, notification: JSONValue? = nil
        ) {
            self.priority = priority
            self.ttl = ttl
            self.collapseKey = collapseKey
            self.restrictedPackageName = restrictedPackageName
            self.directBootOK = directBootOK
            self.notification = notification
        }
    }

    public struct APNS: Sendable, Equatable {
        /// `apns-priority`, `apns-push-type`, `apns-expiration`, `apns-collapse-id`, …
        public var headers: [(String, String)]
        /// The whole APNs payload: `{"aps": {...}, custom keys}`.
        public var payload: JSONValue
        /// A Live Activity's push-to-start or update token (FCM's `live_activity_token`): the
        /// push goes to it, through the device's FCM registration.
        public var liveActivityToken: String?
        public init(headers: [(String, String)], payload: JSONValue, liveActivityToken: String? = nil) {
            self.headers = headers
            self.payload = payload
            self.liveActivityToken = liveActivityToken
        }
        public static func == (lhs: APNS, rhs: APNS) -> Bool {
            lhs.headers.elementsEqual(rhs.headers, by: ==) && lhs.payload == rhs.payload
                && lhs.liveActivityToken == rhs.liveActivityToken
        }
    }

    public var target: Target
    /// String-to-string pairs; FCM refuses any other value type.
    public var data: [(String, String)]
    public var notification: Notification?
    public var android: Android?
    public var apns: APNS?

    public init(
        target: Target, data: [(String, String)] = [], notification: Notification? = nil, android: Android? = nil,
        apns: APNS? = nil
    ) {
        self.target = target
        self.data = data
        self.notification = notification
        self.android = android
        self.apns = apns
    }

    public static func == (lhs: FCMMessage, rhs: FCMMessage) -> Bool {
        lhs.json == rhs.json
    }

    /// The message as a JSON value, with FCM's snake_case field names.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        switch target {
        case .token(let token): members.append(("token", .string(token)))
        case .topic(let topic): members.append(("topic", .string(topic)))
        case .condition(let condition): members.append(("condition", .string(condition)))
        case .fid(let fid): members.append(("fid", .string(fid)))
        }
        if !data.isEmpty { members.append(("data", .object(data.map { ($0.0, .string($0.1)) }))) }
        if let notification {
            var fields: [(String, JSONValue)] = []
            if let title = notification.title { fields.append(("title", .string(title))) }
            if let body = notification.body { fields.append(("body", .string(body))) }
            if let image = notification.image { fields.append(("image", .string(image))) }
            members.append(("notification", .object(fields)))
        }
        if let android {
            var fields: [(String, JSONValue)] = []
            if let priority = android.priority { fields.append(("priority", .string(priority.rawValue))) }
            if let ttl = android.ttl { fields.append(("ttl", .string(Self.durationString(ttl)))) }
            if let key = android.collapseKey { fields.append(("collapse_key", .string(key))) }
            if let name = android.restrictedPackageName { fields.append(("restricted_package_name", .string(name))) }
            if let directBootOK = android.directBootOK { fields.append(("direct_boot_ok", .bool(directBootOK))) }
            if let notification = android.notification { fields.append(("notification", notification)) }
            members.append(("android", .object(fields)))
        }
        if let apns {
            var fields: [(String, JSONValue)] = [
                ("headers", .object(apns.headers.map { ($0.0, .string($0.1)) })), ("payload", apns.payload),
            ]
            if let token = apns.liveActivityToken { fields.append(("live_activity_token", .string(token))) }
            members.append(("apns", .object(fields)))
        }
        return .object(members)
    }

    /// The body of a `messages:send` request.
    public func sendRequestBody(validateOnly: Bool) -> [UInt8] {
        JSONValue.object([("message", json), ("validate_only", .bool(validateOnly))]).encodedBytes
    }

    /// A protobuf Duration in JSON form: whole seconds as `"3600s"`, fractions as `"3.5s"`.
    public static func durationString(_ duration: Duration) -> String {
        let parts = duration.components
        if parts.attoseconds == 0 { return "\(parts.seconds)s" }
        var fraction = String(parts.attoseconds / 1_000_000_000)  // nanoseconds
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(parts.seconds).\(fraction)s"
    }
}
