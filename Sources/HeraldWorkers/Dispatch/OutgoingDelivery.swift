import Foundation

/// One delivery as the dispatch worker claims it: the notification's content and options,
/// the device's token and the app's FCM project.
public struct OutgoingDelivery: Sendable {
    public enum PayloadKind: String, Sendable {
        case androidData = "android_data"
        case iosAlert = "ios_alert"
        case iosBackground = "ios_background"
        /// Herald's own background push to an iOS device that missed notifications.
        case iosWakeup = "ios_wakeup"
        case topic
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
    /// When the app's credentials or APNs setup last failed, if they still do.
    public var appConfigErrorAt: Date? = nil
}
