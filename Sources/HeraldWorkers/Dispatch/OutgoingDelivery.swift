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

/// One delivery as the dispatch worker claims it: the notification's content and options,
/// the device's token (and a browser's keys) and the app's provider settings.
public struct OutgoingDelivery: Sendable {
    public enum PayloadKind: String, Sendable, CaseIterable {
        case androidData = "android_data"
        case iosAlert = "ios_alert"
        case iosBackground = "ios_background"
        /// Herald's own background push to an iOS device that missed notifications.
        case iosWakeup = "ios_wakeup"
        case topic
        /// A browser, through its push service (Web Push).
        case web
    }

    /// What the device's token is, which decides how it is sent.
    public enum TokenKind: String, Sendable, CaseIterable {
        case registrationToken = "registration_token"
        /// A Firebase Installation ID (FCM's `fid` target).
        case installationID = "installation_id"
        case apnsDeviceToken = "apns_device_token"
        case webSubscription = "web_subscription"
    }

    /// How a delivery goes out, and so which of the app's configurations it depends on.
    public enum Route: Hashable, Sendable, CustomStringConvertible {
        /// Android and topic sends through FCM.
        case fcm
        /// iOS sends through FCM, which also need the app's APNs setup in Firebase.
        case fcmAPNs
        /// Browsers, through their push services.
        case web
        /// iOS devices with an APNs device token, straight to APNs.
        case apns

        /// The configurations a send on this route needs.
        public var scopes: [ConfigurationScope] {
            switch self {
            case .fcm: [.fcm]
            case .fcmAPNs: [.fcm, .fcmAPNs]
            case .web: [.web]
            case .apns: [.apns]
            }
        }

        /// Who answers for it, as reasons name it.
        public var provider: String {
            switch self {
            case .fcm, .fcmAPNs: "FCM"
            case .web: "Web Push"
            case .apns: "APNs"
            }
        }

        /// The `route` label of the route metrics.
        public var metricName: String {
            switch self {
            case .fcm: "fcm"
            case .fcmAPNs: "fcm_apns"
            case .web: "web"
            case .apns: "apns"
            }
        }

        public var description: String {
            switch self {
            case .fcm: "FCM"
            case .fcmAPNs: "iOS through FCM"
            case .web: "browsers (Web Push)"
            case .apns: "iOS straight to APNs"
            }
        }
    }

    public var route: Route {
        switch payloadKind {
        case .androidData, .topic: .fcm
        case .iosAlert, .iosBackground, .iosWakeup: tokenKind == .apnsDeviceToken ? .apns : .fcmAPNs
        case .web: .web
        }
    }

    public var deliveryID: Int64
    public var notificationID: Int64
    /// Claims so far, this one included.
    public var attempts: Int
    /// The worker whose lease on it ran out before it recorded an outcome, if one did.
    public var abandonedBy: String?
    public var payloadKind: PayloadKind
    public var deviceRowID: Int64?
    public var pushToken: String?
    public var tokenKind: TokenKind = .registrationToken
    /// Why the device is disabled, when it is.
    public var deviceDisabledReason: String?
    public var appID: String
    public var fcmProjectID: String
    public var credentialsFile: String?
    public var topic: String?
    public var title: String?
    public var body: String?
    /// The producer's data, strings only (ingest converted the rest).
    public var data: [(String, String)]
    public var imageURL: String?
    public var sound: String?
    public var badge: Int?
    public var androidChannelID: String?
    public var iosCategory: String?
    public var iosThreadID: String?
    public var deepLink: String?
    /// `high` or `normal`.
    public var priority: String
    public var expiresAt: Date
    public var collapseKey: String?
    public var silent: Bool
    public var dryRun: Bool
    /// A browser's subscription keys (`web` only): its P-256 public key and auth secret.
    public var webP256dh: [UInt8]? = nil
    public var webAuth: [UInt8]? = nil
    /// The app's VAPID key file and contact, for browsers.
    public var vapidKeyFile: String? = nil
    public var vapidSubject: String? = nil
    /// The app's APNs setup, for iOS devices with APNs device tokens.
    public var apnsEnvironment: String? = nil
    public var apnsBundleID: String? = nil
    public var apnsTeamID: String? = nil
    public var apnsKeyID: String? = nil
    public var apnsKeyFile: String? = nil
    public var apnsCertificateFile: String? = nil
    /// The push service hosts the app's browsers may name (`herald.apps.web_push_hosts`, or the
    /// default), and whether they may be private addresses.
    public var webPushHosts: [String] = []
    public var webPushPrivateAddresses = false
    /// When a configuration this delivery's route needs last failed, if it still does.
    public var configurationFailedAt: Date? = nil
}
