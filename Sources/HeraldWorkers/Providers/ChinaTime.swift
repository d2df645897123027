import Foundation

/// Time as the phone makers' push services in mainland China count it (UTC+8, no daylight
/// saving): their daily quotas start again at its midnight, and some take marketing only in its
/// daytime.
enum ChinaTime {
    static let offset: TimeInterval = 8 * 3600

    /// Seconds since midnight in China at `now`.
    static func intoDay(_ now: Date) -> TimeInterval {
        (now.timeIntervalSince1970 + offset).truncatingRemainder(dividingBy: 86_400)
    }

    /// How long until the next midnight in China.
    static func untilMidnight(_ now: Date) -> Duration { .seconds(86_400 - intoDay(now)) }
}
