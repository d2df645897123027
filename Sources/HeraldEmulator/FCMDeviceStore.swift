import Foundation

/// What an Android app instance receives from FCM, for the tokens a test or the demo models
/// (``Emulator/setFCMDevice(_:online:)``); a token nobody models is simply online.
///
/// As Firebase documents it ("Non-collapsible and collapsible messages", `onDeletedMessages`):
/// while the phone is offline FCM stores at most 100 non-collapsible messages for it, and past
/// that discards every stored one; it keeps one message per collapse key, for four keys at most,
/// with no rule for which survive (here the oldest key goes); a message whose TTL runs out is
/// dropped, and a TTL of 0 is delivered only to a phone online now. A phone that FCM judged inactive has its messages
/// dropped. A phone whose messages were dropped for either reason gets `onDeletedMessages()`
/// when it connects again, and nothing else of them.
public struct FCMDevice: Sendable {
    /// The most non-collapsible messages FCM keeps for an offline phone.
    public static let storeLimit = 100
    /// The most collapse keys it keeps messages for.
    public static let collapseKeyLimit = 4

    public var online = true
    /// Inactive phones (offline for about a month) have their messages dropped.
    public var inactive = false
    /// What the app was handed, in order: `onMessageReceived`.
    public private(set) var received: [ReceivedMessage] = []
    /// How many times the app was told `onDeletedMessages()`.
    public private(set) var deletedNotices = 0
    /// Messages waiting in FCM while the phone is offline.
    public private(set) var stored: [ReceivedMessage] = []
    private var collapsed: [(key: String, message: ReceivedMessage)] = []
    /// Messages were dropped since the phone was last online.
    private var dropped = false

    /// How many non-collapsible messages wait for the phone.
    public var storedCount: Int { stored.count }

    /// FCM accepted `message` for this phone.
    mutating func accept(_ message: ReceivedMessage, now: Date) {
        let android = message.message["android"] as? [String: Any]
        let collapseKey = android?["collapse_key"] as? String
        if online && !inactive {
            received.append(message)
            return
        }
        if inactive {
            dropped = true
            return
        }
        if Self.ttl(of: message) == 0 { return }
        if let collapseKey {
            collapsed.removeAll { $0.key == collapseKey }
            if collapsed.count == Self.collapseKeyLimit { collapsed.removeFirst() }
            collapsed.append((collapseKey, message))
        } else if stored.count == Self.storeLimit {
            // The message past the limit goes with the rest.
            stored.removeAll()
            dropped = true
        } else {
            stored.append(message)
        }
    }

    /// The phone connects (`true`) or goes away: on connecting it gets what FCM kept for it, in
    /// the order sent, unless it expired, and `onDeletedMessages()` if anything was dropped.
    mutating func setOnline(_ online: Bool, now: Date) {
        self.online = online
        guard online else { return }
        inactive = false
        if dropped { deletedNotices += 1 }
        let waiting = (stored + collapsed.map(\.message)).sorted { $0.at < $1.at }
        received += waiting.filter { $0.at.addingTimeInterval(TimeInterval(Self.ttl(of: $0) ?? 2_419_200)) > now }
        stored.removeAll()
        collapsed.removeAll()
        dropped = false
    }

    /// FCM judges the phone inactive: what it stored is dropped, and so is what comes next.
    mutating func makeInactive() {
        online = false
        inactive = true
        if !stored.isEmpty || !collapsed.isEmpty { dropped = true }
        stored.removeAll()
        collapsed.removeAll()
    }

    /// The message's `android.ttl` in seconds ("3600s"); nil when it has none (FCM's default, 4 weeks).
    static func ttl(of message: ReceivedMessage) -> Int? {
        guard let ttl = (message.message["android"] as? [String: Any])?["ttl"] as? String, ttl.hasSuffix("s") else {
            return nil
        }
        return Double(ttl.dropLast()).map { Int($0) }
    }
}
