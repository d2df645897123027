import Foundation

/// What Apple requires of a Live Activity push's `aps` (ActivityKit's "Starting and updating Live
/// Activities with ActivityKit push notifications"), checked the same way whether it comes
/// straight to the emulator's APNs or through its FCM: `event` is start, update or end;
/// `timestamp` is a whole number of seconds; `content-state` is an object (an end may leave it
/// out); a start also has `attributes-type`, `attributes` and an `alert`; the dates are numbers.
enum LiveActivityRules {
    static let topicSuffix = ".push-type.liveactivity"

    /// The problem with `aps`, or nil.
    static func problem(_ aps: [String: Any]) -> String? {
        guard let event = aps["event"] as? String, ["start", "update", "end"].contains(event) else {
            return "aps.event must be start, update or end"
        }
        guard aps["timestamp"] is Int else { return "aps.timestamp must be a whole number of seconds" }
        if event != "end" || aps["content-state"] != nil {
            guard aps["content-state"] is [String: Any] else { return "aps.content-state must be an object" }
        }
        if event == "start" {
            guard aps["attributes-type"] is String, aps["attributes"] is [String: Any] else {
                return "a start needs aps.attributes-type and aps.attributes"
            }
            guard aps["alert"] != nil else { return "a start needs aps.alert" }
        }
        for key in ["stale-date", "dismissal-date"] where aps[key] != nil && !(aps[key] is Int) {
            return "aps.\(key) must be a whole number of seconds"
        }
        return nil
    }

    /// Whether a device would show an event with this timestamp (seconds) after the newest it
    /// showed: not an older one, not one from the future (a timestamp in milliseconds looks like
    /// one), and nothing after the activity ended.
    static func shown(timestamp: Int, newest: Int?, ended: Bool, now: Date) -> Bool {
        !ended && timestamp >= (newest ?? .min) && Double(timestamp) <= now.timeIntervalSince1970 + 60
    }
}
