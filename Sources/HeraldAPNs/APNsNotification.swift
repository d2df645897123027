import Foundation

/// One notification for one device, as APNs' provider API takes it.
public struct APNsNotification: Sendable {
    public enum PushType: String, Sendable {
        case alert, background
        /// A Live Activity's event (ActivityKit), to the topic `<bundle id>.push-type.liveactivity`.
        case liveActivity = "liveactivity"

        /// The topic APNs expects for this push type, from the app's bundle id.
        public func topic(bundleID: String) -> String {
            self == .liveActivity ? bundleID + ".push-type.liveactivity" : bundleID
        }
    }

    /// The device token, hex.
    public var deviceToken: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    public var pushType: PushType
    /// 10 (now), 5 (power-considerate; required for background pushes) or 1.
    public var priority: Int
    /// When APNs stops trying to deliver it (`apns-expiration`).
    public var expiration: Date
    /// A stored notification with the same id is replaced by this one (`apns-collapse-id`,
    /// 64 bytes at most).
    public var collapseID: String?
    /// Herald's id for this send (`apns-id`), recorded so that an operator can correlate.
    public var id: UUID
    /// The JSON payload: `aps` and custom keys, 4096 bytes at most (5120 for a broadcast).
    public var payload: [UInt8]
    /// A broadcast's channel (`apns-channel-id`, iOS 18): sent to every subscriber of the
    /// channel (`POST /4/broadcasts/apps/{topic}`) instead of to `deviceToken`.
    public var channelID: String? = nil

    public static let maxPayloadBytes = 4096
    public static let maxBroadcastPayloadBytes = 5120

    /// How large its payload may be.
    public var payloadLimit: Int { channelID == nil ? Self.maxPayloadBytes : Self.maxBroadcastPayloadBytes }

    /// The request's path.
    public var path: String { channelID == nil ? "/3/device/\(deviceToken)" : "/4/broadcasts/apps/\(topic)" }

    public init(
        deviceToken: String, topic: String, pushType: PushType, priority: Int, expiration: Date,
        collapseID: String? = nil, id: UUID = UUID(), payload: [UInt8], channelID: String? = nil
    ) {
        self.channelID = channelID
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.id = id
        self.payload = payload
    }

    /// The request headers other than `authorization`. A broadcast names its channel, and has
    /// no topic (the path names the app), collapse id or `apns-id` (its id is `apns-request-id`).
    public var headers: [(name: String, value: String)] {
        if let channelID {
            return [
                ("apns-channel-id", channelID), ("apns-push-type", pushType.rawValue),
                ("apns-priority", String(priority)),
                ("apns-expiration", String(max(0, Int(expiration.timeIntervalSince1970)))),
                ("apns-request-id", id.uuidString.lowercased()),
            ]
        }
        var headers: [(name: String, value: String)] = [
            ("apns-topic", topic), ("apns-push-type", pushType.rawValue), ("apns-priority", String(priority)),
            ("apns-expiration", String(max(0, Int(expiration.timeIntervalSince1970)))),
            ("apns-id", id.uuidString.lowercased()),
        ]
        if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        return headers
    }
}

/// Where an app's notifications go: Apple's production or development servers.
public enum APNsEnvironment: String, Sendable {
    case production, development

    public var baseURL: String {
        switch self {
        case .production: "https://api.push.apple.com"
        case .development: "https://api.sandbox.push.apple.com"
        }
    }
}
