import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `timestamptz` text in the form every Herald session uses (ISO, UTC): `2026-11-22 03:05:49.123456+00`.
///
/// Connections set `TimeZone=UTC` and `DateStyle=ISO`, so one fast parser suffices and
/// no `DateFormatter` (slow, and not thread-safe to share) is needed on the hot path.
enum PostgresTimestamp {
    static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        var micros = Int(((interval - Double(seconds)) * 1_000_000).rounded())
        if micros >= 1_000_000 {
            seconds += 1
            micros -= 1_000_000
        }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), micros)
    }

    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM]]`, and `infinity`/`-infinity`.
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> Date? {
        if text.elementsEqual("infinity".utf8) { return .distantFuture }
        if text.elementsEqual("-infinity".utf8) { return .distantPast }
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= text.count else { return nil }
            var value = 0
            for _ in 0..<digits {
                let byte = text[index]
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
                index += 1
            }
            return value
        }
        func expect(_ character: UInt8) -> Bool {
            guard index < text.count, text[index] == character else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect(45), let month = number(2), expect(45), let day = number(2),
            expect(32), let hour = number(2), expect(58), let minute = number(2), expect(58),
            let second = number(2)
        else { return nil }
        var fraction = 0.0
        if index < text.count, text[index] == 46 {
            index += 1
            var scale = 0.1
            while index < text.count, text[index] >= 48, text[index] <= 57 {
                fraction += Double(text[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offsetSeconds = 0
        if index < text.count, text[index] == 43 || text[index] == 45 {
            let sign = text[index] == 45 ? -1 : 1
            index += 1
            guard let hours = number(2) else { return nil }
            var minutes = 0
            if expect(58) { minutes = number(2) ?? 0 }
            offsetSeconds = sign * (hours * 3600 + minutes * 60)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let epoch = timegm(&parts)
        return Date(timeIntervalSince1970: Double(epoch - offsetSeconds) + fraction)
    }
}
