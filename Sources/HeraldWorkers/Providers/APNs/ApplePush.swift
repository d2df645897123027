import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto

extension OutgoingDelivery.PayloadKind {
    /// A notification to an iOS device, shown by the system (`aps.alert`).
    static let iosAlert = Self(rawValue: "ios_alert")
    /// A silent notification to an iOS device: data for the app (`content-available`).
    static let iosBackground = Self(rawValue: "ios_background")
    /// Herald's own background push to an iOS device that missed notifications.
    static let iosWakeup = Self(rawValue: "ios_wakeup")
    /// What the Apple push (``PayloadBuilder/applePush(_:now:)``) is built for, whichever
    /// provider carries it.
    static let applePush: Set<Self> = [.iosAlert, .iosBackground, .iosWakeup, .liveActivity]
}

/// The shape of a push to Apple's platforms, which APNs takes straight and FCM in its `apns`
/// block (see ``PayloadBuilder``):
///
/// - iOS alert: `aps.alert` with `mutable-content: 1`, so the Notification Service Extension
///   runs and reports the delivery with `herald_report`.
/// - iOS background (`silent`, and Herald's wake-ups): `aps` holds only `content-available: 1`,
///   push type `background`, priority 5; a wake-up expires within two minutes.
/// - Every iOS push has an `apns-collapse-id` (the collapse key, or the notification id), so
///   that a repeated send replaces rather than adds, whichever way it goes, by the device's
///   token.
/// - Live Activity event, or broadcast to a channel: ActivityKit's payload
///   (``liveActivityPush(_:_:)``), to the activity's token or the channel.
extension PayloadBuilder {
    /// An iOS notification as APNs takes it, whichever way it goes (FCM's `apns` block or APNs
    /// directly): one home for its shape.
    struct ApplePush {
        var pushType: APNsNotification.PushType
        var priority: Int
        var expiration: Date
        var collapseID: String?
        var payload: JSONValue
        /// A Live Activity's token: where the push goes instead of the device's.
        var activityToken: String? = nil
    }

    /// How long a wake-up may wait in APNs' one slot per offline device: a wake-up goes to a
    /// device that has just reported, so it is normally online, and one that is not must never
    /// take the slot of an alert sent since (notifo-io/notifo#173).
    static let wakeupExpiration: TimeInterval = 120

    func applePush(_ delivery: OutgoingDelivery, now: Date) -> ApplePush {
        let notification = delivery.notification
        // A repeated send (at-least-once) replaces rather than adds: APNs keeps one stored
        // notification per collapse id, and one per device anyway. 64 bytes at most.
        if let activity = delivery.liveActivity { return liveActivityPush(delivery, activity) }
        let collapseID = Self.collapseID(notification.collapseKey ?? String(notification.id))
        switch delivery.payloadKind {
        case .iosBackground, .iosWakeup:
            let expiration =
                delivery.payloadKind == .iosWakeup
                ? min(notification.expiresAt, now.addingTimeInterval(Self.wakeupExpiration)) : notification.expiresAt
            return ApplePush(
                pushType: .background, priority: 5, expiration: expiration, collapseID: collapseID,
                payload: payload(
                    aps: [("content-available", .int(1))], custom: merged(notification.data, heraldKeys(delivery))))
        default:
            var alert: [(String, JSONValue)] = []
            if let title = notification.title { alert.append(("title", .string(title))) }
            if let body = notification.body { alert.append(("body", .string(body))) }
            var aps: [(String, JSONValue)] = [("alert", .object(alert)), ("mutable-content", .int(1))]
            if let badge = notification.badge { aps.append(("badge", .int(badge))) }
            if notification.apple.interruptionLevel == "critical" {
                // A critical alert's sound is a dictionary: it plays even when the device is muted
                // (the app needs Apple's Critical Alerts entitlement).
                aps.append(
                    ("sound", .object([("critical", .int(1)), ("name", .string(notification.sound ?? "default"))])))
            } else if let sound = notification.sound {
                aps.append(("sound", .string(sound)))
            }
            if let category = notification.apple.category { aps.append(("category", .string(category))) }
            if let thread = notification.apple.threadID { aps.append(("thread-id", .string(thread))) }
            if let level = notification.apple.interruptionLevel { aps.append(("interruption-level", .string(level))) }
            if let score = notification.apple.relevanceScore { aps.append(("relevance-score", .double(score))) }
            if let criteria = notification.apple.filterCriteria { aps.append(("filter-criteria", .string(criteria))) }
            if let target = notification.apple.targetContentID { aps.append(("target-content-id", .string(target))) }
            var custom: [(String, String)] = []
            if let image = notification.imageURL { custom.append((PayloadKeys.imageURL, image)) }
            if let link = notification.deepLink { custom.append((PayloadKeys.deepLink, link)) }
            return ApplePush(
                pushType: .alert, priority: notification.priority == "normal" ? 5 : 10,
                expiration: notification.expiresAt,
                collapseID: collapseID,
                payload: payload(aps: aps, custom: merged(notification.data, custom + heraldKeys(delivery))))
        }
    }

    /// A Live Activity event (ActivityKit's push payload): `event`, `timestamp` (seconds: the
    /// device shows the newest), `content-state`, a start's `attributes-type` and `attributes`,
    /// the dates and the relevance score, and an alert from the title and body (a start always
    /// has one). Priority 5 unless the producer made it urgent (a start is 10): priority 10 draws
    /// on a budget Apple sets per device. No collapse id, and no keys beside `aps`: the system
    /// reads the push, not the app.
    func liveActivityPush(_ delivery: OutgoingDelivery, _ activity: OutgoingDelivery.LiveActivity) -> ApplePush {
        let notification = delivery.notification
        var aps: [(String, JSONValue)] = [
            ("timestamp", .int(Int(activity.eventAt.timeIntervalSince1970))),
            ("event", .string(activity.event.rawValue)),
        ]
        if let state = activity.contentState { aps.append(("content-state", .raw(state))) }
        if activity.event == .start, let type = activity.attributesType, let attributes = activity.attributes {
            aps.append(("attributes-type", .string(type)))
            aps.append(("attributes", .raw(attributes)))
        }
        if let stale = activity.staleAt { aps.append(("stale-date", .int(Int(stale.timeIntervalSince1970)))) }
        if let dismiss = activity.dismissAt {
            aps.append(("dismissal-date", .int(Int(dismiss.timeIntervalSince1970))))
        }
        if let score = notification.apple.relevanceScore { aps.append(("relevance-score", .double(score))) }
        if notification.title != nil || notification.body != nil {
            var alert: [(String, JSONValue)] = []
            if let title = notification.title { alert.append(("title", .string(title))) }
            if let body = notification.body { alert.append(("body", .string(body))) }
            if let sound = notification.sound { alert.append(("sound", .string(sound))) }
            aps.append(("alert", .object(alert)))
        }
        return ApplePush(
            pushType: .liveActivity, priority: notification.priority == "normal" ? 5 : 10,
            expiration: notification.expiresAt,
            collapseID: nil, payload: .object([("aps", .object(aps))]), activityToken: activity.token)
    }

    /// A collapse key as an `apns-collapse-id`: itself when it fits APNs' 64 bytes of printable
    /// ASCII, else a digest of it, so that equal keys still replace each other. Ingest refuses
    /// longer keys and control characters; this keeps the header safe whatever a row holds.
    static func collapseID(_ key: String) -> String {
        let safe = key.utf8.count <= 64 && key.utf8.allSatisfy { (0x20...0x7E).contains($0) }
        return safe ? key : Base64URL.encode(HMAC.sha256(key: Array("herald collapse".utf8), Array(key.utf8)))
    }

    func payload(aps: [(String, JSONValue)], custom: [(String, String)]) -> JSONValue {
        .object([("aps", .object(aps))] + custom.map { ($0.0, .string($0.1)) })
    }
}
