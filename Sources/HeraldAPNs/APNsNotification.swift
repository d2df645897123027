import Foundation

/// One notification for one device, as APNs' provider API takes it.
public struct APNsNotification: Sendable {
    public enum PushType: String, Sendable, CaseIterable {
        case alert, background
        /// A Live Activity's event (ActivityKit).
        case liveActivity = "liveactivity"
        /// WidgetKit's push update: the widgets reload their timelines (iOS 26).
        case widgets
        /// An incoming call, for PushKit (the app must report it to CallKit).
        case voip
        /// A location query, for the app's Location Push Service Extension.
        case location
        /// Push to Talk: the system launches the app to play or stop a channel's audio.
        case pushToTalk = "pushtotalk"

        /// What APNs expects after the bundle id in `apns-topic`: each push type but alert and
        /// background has a topic of its own, which a token of that type only is good for.
        public var topicSuffix: String {
            switch self {
            case .alert, .background: ""
            case .liveActivity: ".push-type.liveactivity"
            case .widgets: ".push-type.widgets"
            case .voip: ".voip"
            case .location: ".location-query"
            case .pushToTalk: ".voip-ptt"
            }
        }

        /// A push type only some apps are set up for, to a token of its own (widgets, VoIP,
        /// location, Push to Talk): not the app's notifications, nor its Live Activities.
        public var isAppExtra: Bool { ![.alert, .background, .liveActivity].contains(self) }

        /// The topic APNs expects for this push type, from the app's bundle id.
        public func topic(bundleID: String) -> String { bundleID + topicSuffix }
    }

    /// The device token, hex.
    public var deviceToken: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    public var pushType: PushType
    /// 10 (now), 5 (power-considerate; required for background pushes) or 1; nil sends no
    /// `apns-priority` (APNs takes 10), as Apple's widget pushes do.
    public var priority: Int?
    /// When APNs stops trying to deliver it (`apns-expiration`; the epoch: one attempt, never
    /// stored); nil sends no header (APNs' own storage policy), as Apple's widget pushes do.
    public var expiration: Date?
    /// A stored notification with the same id is replaced by this one (`apns-collapse-id`,
    /// 64 bytes at most).
    public var collapseID: String?
    /// Herald's id for this send (`apns-id`), recorded so that an operator can correlate.
    public var id: UUID
    /// The JSON payload: `aps` and custom keys, 4096 bytes at most (5120 for a broadcast or a
    /// VoIP push).
    public var payload: [UInt8]
    /// A broadcast's channel (`apns-channel-id`, iOS 18): sent to every subscriber of the
    /// channel (`POST /4/broadcasts/apps/{topic}`) instead of to `deviceToken`.
    public var channelID: String? = nil

    public static let maxPayloadBytes = 4096
    public static let maxBroadcastPayloadBytes = 5120

    /// How large its payload may be.
    public var payloadLimit: Int {
        channelID == nil && pushType != .voip ? Self.maxPayloadBytes : Self.maxBroadcastPayloadBytes
    }

    /// The request's path.
    public var path: String { channelID == nil ? "/3/device/\(deviceToken)" : "/4/broadcasts/apps/\(topic)" }

    public init(
        deviceToken: String, topic: String, pushType: PushType, priority: Int?, expiration: Date?,
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
        var headers: [(name: String, value: String)] =
            channelID.map { [("apns-channel-id", $0)] } ?? [("apns-topic", topic)]
        headers.append(("apns-push-type", pushType.rawValue))
        if let priority { headers.append(("apns-priority", String(priority))) }
        if let expiration { headers.append(("apns-expiration", String(max(0, Int(expiration.timeIntervalSince1970))))) }
        if channelID != nil {
            headers.append(("apns-request-id", id.uuidString.lowercased()))
        } else {
            headers.append(("apns-id", id.uuidString.lowercased()))
            if let collapseID { headers.append(("apns-collapse-id", collapseID)) }
        }
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
