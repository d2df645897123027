import Foundation
import HeraldCore

/// What became of a delivery (`herald.deliveries.state`); a test checks these against the
/// table's CHECK constraint.
public enum DeliveryState: String, Sendable, CaseIterable {
    /// Waiting to be sent: due, leased, backing off, or scheduled.
    case queued
    case sent
    /// A dry run the provider accepted without sending.
    case validated
    /// The device reported it.
    case delivered
    case expired
    case cancelled
    /// The provider declared the device's token dead; the device is soft-disabled.
    case tokenInvalid = "token_invalid"
    case failed
}

/// One delivery as the dispatch worker claims it, in small parts: what to send
/// (``Notification``), to what (``Target``, and the ``Device`` it belongs to), by which
/// ``Route``, and for which Live Activity or broadcast channel. The claim decodes each part by
/// its columns' names (`DispatchWorker+Claim.swift`). Its app's setup is the route's
/// (``AppSetup``), read once per app.
public struct OutgoingDelivery: Sendable {
    /// What a delivery is sent as (`herald.deliveries.payload_kind`), which ingest chose by the
    /// device's platform (`herald.platforms`) or the notification's kind. Open: each provider
    /// names the kinds it builds (``ProviderRoute/payloadKinds``) beside its code, and a kind
    /// none of this daemon's providers builds waits for a daemon that does
    /// (``DispatchWorker/NotSendableHere``). The three here are Herald's own features, whoever
    /// sends them.
    public struct PayloadKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A notification to a topic (`herald.notifications.topic`), to no device.
        public static let topic = Self(rawValue: "topic")
        /// An event of a Live Activity, to one of its tokens (``LiveActivity``).
        public static let liveActivity = Self(rawValue: "live_activity")
        /// A Live Activity update or end to every activity subscribed to a broadcast channel.
        public static let broadcast = Self(rawValue: "broadcast")
    }

    /// What the producer asked to send (`herald.notifications`), as every provider reads it.
    public struct Notification: Sendable {
        public var id: Int64
        public var title: String? = nil
        public var body: String? = nil
        /// The producer's data, strings only (ingest converted the rest).
        public var data: [(String, String)] = []
        public var imageURL: String? = nil
        public var sound: String? = nil
        public var badge: Int? = nil
        public var deepLink: String? = nil
        /// `high` or `normal`.
        public var priority: String
        public var expiresAt: Date
        public var collapseKey: String? = nil
        public var silent: Bool
        public var dryRun: Bool
        public var messageClass: MessageClass = .marketing
        public var apple = Apple()
        public var android = Android()

        /// How the phone makers' push services (Xiaomi, OPPO, vivo, Honor, HarmonyOS) class it,
        /// as the producer said (`message_class`) or the app's default: each provider maps it to
        /// its own fields. A marketing message has a few a day on each phone and shows quietly.
        public enum MessageClass: String, Sendable {
            case service, marketing
        }

        /// The options only Apple's platforms read (`aps`).
        public struct Apple: Sendable {
            public var category: String? = nil
            public var threadID: String? = nil
            /// `aps.interruption-level`: passive, active, time-sensitive or critical.
            public var interruptionLevel: String? = nil
            /// `aps.relevance-score`, 0 to 1.
            public var relevanceScore: Double? = nil
            /// `aps.filter-criteria`: the Focus filter that lets it through.
            public var filterCriteria: String? = nil
            /// `aps.target-content-id`.
            public var targetContentID: String? = nil
        }

        /// The options only Android reads.
        public struct Android: Sendable {
            public var channelID: String? = nil
            /// `android.direct_boot_ok`.
            public var directBootOK: Bool? = nil
            /// `android.notification.proxy` of a topic send: allow, deny or if_priority_lowered.
            public var proxy: String? = nil
        }
    }

    /// The device a delivery is for (`herald.devices`); a topic send or a broadcast has none.
    public struct Device: Sendable {
        public var rowID: Int64
        /// Why the device is disabled, when it is.
        public var disabledReason: String? = nil
        /// When the device's current registration began, when that was after the delivery was
        /// made for an earlier one (another user's, or before a logout): it is not sent.
        public var registeredAgainAt: Date? = nil
        /// What the app reports the delivery with (`herald.delivery_reference`, which the claim
        /// makes and `herald.report_delivery` opens).
        public var reportReference: String
        /// For a push of another type (``OutgoingDelivery/pushType``): the row of
        /// `herald.push_type_tokens` the target's token is. The provider refusing it disables
        /// that token, never the device.
        public var pushTypeTokenRowID: Int64? = nil
        /// Why that token is disabled, when it is.
        public var pushTypeTokenDisabledReason: String? = nil
    }

    /// A Live Activity event and the token it goes to (`herald.activity_tokens`): a push-to-start
    /// token for a start, the activity's update token for an update or an end. It goes straight
    /// to APNs when the device has an APNs device token, else through FCM (`live_activity_token`).
    /// A broadcast has no token: it goes to its channel.
    public struct LiveActivity: Sendable {
        public enum Event: String, Sendable { case start, update, end }
        public var event: Event
        /// The app's id for the activity, or a broadcast's channel name.
        public var activityID: String
        /// The APNs token, hex, and its row; nil for a broadcast.
        public var token: String? = nil
        public var tokenRowID: Int64? = nil
        /// Why the token ended, when nothing should be sent to it any more.
        public var tokenEndedReason: String? = nil
        /// The token's newer delivery, when a newer event superseded this one.
        public var supersededBy: Int64? = nil
        /// A start's: the ActivityAttributes type and its JSON (with `herald_activity`).
        public var attributesType: String? = nil
        public var attributes: String? = nil
        /// The ContentState as JSON.
        public var contentState: String? = nil
        public var staleAt: Date? = nil
        public var dismissAt: Date? = nil
        /// `aps.timestamp`: when the event happened.
        public var eventAt: Date
    }

    /// A broadcast's channel (`herald.broadcast_channels`), as it is when the delivery is claimed.
    public struct Channel: Sendable {
        public var name: String
        /// `creating`, `active`, `deleting`, `deleted` or `failed`; nil when the channel is gone.
        public var state: String?
        /// Whether APNs keeps its most recent message for offline devices.
        public var storesLatest: Bool
    }

    /// The kinds of a device's token (`herald.devices.token_kind`).
    public enum TokenKind: String, Sendable, CaseIterable {
        case registrationToken = "registration_token"
        case installationID = "installation_id"
        case apnsDeviceToken = "apns_device_token"
        case webSubscription = "web_subscription"
    }

    /// What a delivery is sent to, by the kind of the device's token (`herald.devices.token_kind`)
    /// or, for a topic send, the notification's topic.
    public enum Target: Sendable {
        /// An FCM registration token.
        case registrationToken(String)
        /// A Firebase Installation ID (FCM's `fid` target).
        case installationID(String)
        /// An FCM topic.
        case topic(String)
        /// An APNs device token: sent straight to APNs.
        case apnsDeviceToken(String)
        /// A Web Push subscription (a browser's, a UnifiedPush distributor's: its token kind
        /// says whose): its endpoint, P-256 public key and auth secret.
        case subscription(kind: String, endpoint: String, p256dh: [UInt8], auth: [UInt8])
        /// A broadcast channel at APNs: its id (`apns-channel-id`).
        case channel(String)
        /// A token of a kind only its provider reads (a row of `herald.token_kinds` that none of
        /// the cases above is).
        case token(kind: String, String)

        /// The device's token as `herald.devices.push_token` holds it (a browser's endpoint); nil
        /// for a topic.
        public var deviceToken: String? {
            switch self {
            case .registrationToken(let token), .installationID(let token), .apnsDeviceToken(let token),
                .token(_, let token):
                token
            case .subscription(_, let endpoint, _, _): endpoint
            case .topic, .channel: nil
            }
        }
    }

    /// A way out, as `herald.routes` lists it: which provider sends it, and the configurations
    /// it needs. The claim says which route each delivery takes (`herald.route_targets`).
    public struct Route: Hashable, Sendable, CustomStringConvertible {
        /// `fcm`, `fcm_apns`, `apns`, `web`: the `route` label of the route metrics.
        public var name: String
        /// The provider that sends it, by its name in ``Providers``.
        public var provider: String
        /// As operators read it: "iOS through FCM".
        public var description: String
        /// The configurations a send on this route needs; a setup that cannot be made is a
        /// problem of the first.
        public var scopes: [ConfigurationScope]

        public init(name: String, provider: String, description: String, scopes: [ConfigurationScope]) {
            self.name = name
            self.provider = provider
            self.description = description
            self.scopes = scopes
        }

        // A route is its name (`herald.routes`' key): every delivery is grouped by it, so the
        // rest of the row is not hashed each time.
        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name }
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }
    }

    public var deliveryID: Int64
    public var appID: String
    public var payloadKind: PayloadKind
    /// For a push of another type than the app's own notifications (`herald.push_types`, sent
    /// with `herald.send_push`): its name, as that table gives it for the payload kind.
    public var pushType: String? = nil
    /// Claims so far, this one included.
    public var attempts: Int
    /// The worker whose lease on it ran out before it recorded an outcome, if one did.
    public var abandonedBy: String? = nil
    public var notification: Notification
    /// Nil for a topic send or a broadcast.
    public var device: Device? = nil
    /// Nil when the device has no token (or a topic send no topic): nothing to send to.
    public var target: Target?
    /// Nil when its device's token does not fit its payload: the device registered again, as
    /// another platform, since ingest.
    public var route: Route?
    /// When a configuration this delivery's route needs last failed, if it still does.
    public var configurationFailedAt: Date? = nil
    /// For a Live Activity event (or a broadcast): the event and its token.
    public var liveActivity: LiveActivity? = nil
    /// For a broadcast: its channel.
    public var channel: Channel? = nil
}

extension OutgoingDelivery.PayloadKind {
    /// Sent to a token the app registered for its device: its own, or one of its push type
    /// tokens (not a Live Activity's, a channel or a topic).
    var isAppToken: Bool { self != .liveActivity && self != .broadcast && self != .topic }
}
