import Foundation
import HeraldCore

/// Builds what a delivery is sent as, by its payload kind; each provider's part is in its
/// route's file (``FCMRoute``, ``APNsRoute``, ``WebPushRoute``, …), the Apple push that FCM and
/// APNs both carry in `APNs/ApplePush.swift` (alerts, background pushes and wake-ups, Live
/// Activities and broadcasts), and here what every provider shares:
///
/// - Android: a data-only message, which FCM never collapses while the device is offline;
///   the app shows it itself. `android.ttl` is the time left until the notification expires.
/// - Topic: a `notification` block, since there is no per-device platform.
/// - Browser: a JSON document the service worker shows as it is (``webPushMessage(for:now:)``),
///   encrypted for the browser; `Topic` from the collapse key, `Urgency` from the priority.
///
/// The keys Herald adds are listed in ``PayloadKeys``; where the producer's data uses one of
/// them, Herald's value wins.
public struct PayloadBuilder: Sendable {
    /// Where apps report deliveries over HTTP (`HERALD_PUBLIC_URL`); nil leaves the URL out.
    let reportBaseURL: String?

    public init(reportBaseURL: String? = nil) {
        self.reportBaseURL = reportBaseURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
    }

    /// The longest a provider keeps a message: FCM refuses an `android.ttl` over 28 days
    /// (`herald.max_ttl()`, which ingest holds producers to; this guards rows from before).
    static let maxTTL = 28 * 86_400

    /// The text a phone maker's push service shows for a notification: its title and body, one
    /// not given taking the other's (they require both); nil for a silent notification, or one
    /// with neither, which such a service carries as data or not at all.
    static func shownText(_ notification: OutgoingDelivery.Notification) -> (title: String, body: String)? {
        let title = notification.title.flatMap { $0.isEmpty ? nil : $0 }
        let body = notification.body.flatMap { $0.isEmpty ? nil : $0 }
        guard !notification.silent, let text = title ?? body else { return nil }
        return (title ?? text, body ?? text)
    }

    /// Seconds until the delivery expires, within what providers accept.
    static func ttl(_ delivery: OutgoingDelivery, now: Date) -> Int {
        let remaining = delivery.notification.expiresAt.timeIntervalSince(now)
        return remaining.isFinite ? Int(max(0, min(remaining, Double(maxTTL)))) : maxTTL
    }

    /// A notification's id on an Android phone whose push service shows it (HarmonyOS's
    /// `notifyId`, Mi Push's `notify_id`): they take 0 to 2³¹−1, and a phone shows one
    /// notification of an app per id, so the id is the notification's modulo 2³¹, every value
    /// they take. Two notifications share one only when their ids are a multiple of 2³¹ apart
    /// (ids count every app's notifications): the later replaces the earlier only if the phone
    /// still shows that one then.
    static func notifyID(_ notification: Int64) -> Int { Int(notification & Int64(Int32.max)) }

    /// What a tap on a notification a phone maker's push service shows does: open the app, or
    /// the notification's deep link, an http(s) one as a web page and any other as an intent URI
    /// the app handles.
    enum Tap: Sendable, Equatable {
        case openApp
        case openIntent(String)
        case openWeb(String)

        init(deepLink: String?) {
            switch deepLink {
            case let link? where link.hasPrefix("https://") || link.hasPrefix("http://"): self = .openWeb(link)
            case let link?: self = .openIntent(link)
            case nil: self = .openApp
            }
        }
    }

    /// `text` in at most `limit` characters, the last an ellipsis when it was longer: for a
    /// push service that refuses a longer title or body rather than cutting it.
    static func shortened(_ text: String, to limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }

    /// Herald's own keys, after the producer's data (Herald's win on a clash).
    func heraldKeys(_ delivery: OutgoingDelivery) -> [(String, String)] {
        var keys: [(String, String)] = [(PayloadKeys.notificationID, String(delivery.notification.id))]
        if let report = delivery.device?.reportReference {
            keys.append((PayloadKeys.report, report))
            if let reportBaseURL { keys.append((PayloadKeys.reportURL, "\(reportBaseURL)/v1/reports/\(report)")) }
        }
        return keys
    }

    /// What an Android app reads from a data message to show the notification itself, through
    /// any push service (FCM, Huawei Push Kit): the producer's data, then what to show, then
    /// Herald's keys.
    func androidData(_ delivery: OutgoingDelivery) -> [(String, String)] {
        let notification = delivery.notification
        var shown: [(String, String)] = []
        if let title = notification.title { shown.append((PayloadKeys.title, title)) }
        if let body = notification.body { shown.append((PayloadKeys.body, body)) }
        if let image = notification.imageURL { shown.append((PayloadKeys.imageURL, image)) }
        if let link = notification.deepLink { shown.append((PayloadKeys.deepLink, link)) }
        if let channel = notification.android.channelID { shown.append((PayloadKeys.channelID, channel)) }
        if let sound = notification.sound { shown.append((PayloadKeys.sound, sound)) }
        if notification.silent { shown.append((PayloadKeys.silent, "1")) }
        if delivery.payloadKind == .androidWakeup { shown.append((PayloadKeys.catchUp, "1")) }
        return merged(notification.data, shown + heraldKeys(delivery))
    }

    func merged(_ producer: [(String, String)], _ herald: [(String, String)]) -> [(String, String)] {
        let taken = Set(herald.map(\.0))
        return producer.filter { !taken.contains($0.0) } + herald
    }
}

extension OutgoingDelivery.PayloadKind {
    /// A notification to an Android device, as a data message the app shows itself
    /// (``PayloadBuilder/androidData(_:)``), whichever provider carries it.
    static let androidData = Self(rawValue: "android_data")
    /// Herald's catch-up message to an Android device whose store at FCM is full: a silent,
    /// collapsible data message that makes the app fetch what it missed.
    static let androidWakeup = Self(rawValue: "android_wakeup")
}

/// The payload keys Herald adds, for app developers (see `docs/app-integration.md`).
public enum PayloadKeys {
    public static let notificationID = "herald_notification_id"
    /// The opaque delivery-report reference (devices only, not topics).
    public static let report = "herald_report"
    /// The URL to POST the report to, when Herald's HTTP endpoint is public (`HERALD_PUBLIC_URL`).
    public static let reportURL = "herald_report_url"
    public static let title = "title"
    public static let body = "body"
    public static let imageURL = "image_url"
    public static let deepLink = "deep_link"
    public static let channelID = "channel_id"
    public static let sound = "sound"
    /// "1" on a silent Android data message: the app should not show it.
    public static let silent = "herald_silent"
    /// "1" on Herald's catch-up message: fetch what was missed (`herald.missed_notifications`).
    public static let catchUp = "herald_catch_up"
}
