import Foundation

/// `timestamptz` text in the form every Herald session uses (ISO, UTC): `2026-11-22 03:05:49.123456+00`.
///
/// Connections set `TimeZone=UTC` and `DateStyle=ISO`, so one fast parser suffices and
/// no `DateFormatter` (slow, and not thread-safe to share) is needed on the hot path.
///
/// Every value PostgreSQL can store is read, since any of them may come from a producer:
/// years of five or six digits (up to 294276), years before Christ (`0044-03-15 12:00:00+00 BC`),
/// and offsets with seconds (`+00:19:32`, which sessions in another time zone print for
/// dates before standard time). Dates are the proleptic Gregorian calendar, as PostgreSQL
/// counts them: 1 BC is year 0 and 2 BC year -1 astronomically. The arithmetic is done
/// here on 64-bit integers rather than by `timegm`, whose range and handling of
/// negative years differ between C libraries.
enum PostgresTimestamp {
    /// The text PostgreSQL reads back as the same instant (to the microsecond): four or more
    /// year digits, and ` BC` for years before 1 AD. Infinite dates are PostgreSQL's
    /// `infinity` and `-infinity`.
    ///
    /// An instant outside PostgreSQL's range (4713 BC to 294276 AD) is still written as a date,
    /// which the server then refuses with "timestamp out of range" rather than storing
    /// something else; NaN is written as `NaN`, which it refuses too.
    static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        if interval.isNaN { return "NaN" }
        if interval.isInfinite { return interval > 0 ? "infinity" : "-infinity" }
        // ±1e17 s (three billion years) is far outside PostgreSQL's range yet keeps the
        // arithmetic below within Int64 for any Date.
        let bounded = min(max(interval, -1e17), 1e17)
        var seconds: Int64
        var micros: Int64
        // The microsecond PostgreSQL's `to_timestamp(float8)` makes of the same epoch seconds
        // (their offset from 2000, times a million, rounded half to even), so that a time sent
        // as text and one sent as a number, as composites carry times, are one instant even
        // within a hair of a half microsecond.
        let sinceY2K = ((bounded - 946_684_800) * 1_000_000).rounded(.toNearestOrEven)
        if abs(sinceY2K) < 9e18 {
            let total = Int64(sinceY2K)
            let y2kSeconds = total >= 0 ? total / 1_000_000 : (total - 999_999) / 1_000_000
            seconds = y2kSeconds + 946_684_800
            micros = total - y2kSeconds * 1_000_000
        } else {
            seconds = Int64(bounded.rounded(.down))
            micros = Int64(((bounded - Double(seconds)) * 1_000_000).rounded())
            if micros >= 1_000_000 {
                seconds += 1
                micros -= 1_000_000
            }
        }
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        // PostgreSQL writes 1 BC as 0001 … BC, not as year 0, and reads it back the same way.
        let beforeChrist = year <= 0
        // Without String(format:): Foundation's formatter was a visible share of the daemon's
        // CPU at a trickle, where every statement carries a timestamp (docs/benchmarks-history.md,
        // "A trickle"). Every field is at least 0.
        func padded(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let date = "\(padded(beforeChrist ? 1 - year : year, 4))-\(padded(month, 2))-\(padded(day, 2))"
        let time = "\(padded(secondOfDay / 3600, 2)):\(padded(secondOfDay / 60 % 60, 2)):\(padded(secondOfDay % 60, 2))"
        return "\(date) \(time).\(padded(micros, 6))+00" + (beforeChrist ? " BC" : "")
    }

    /// Parses `Y…YYYY-MM-DD HH:MM:SS[.ffffff][±HH[:MM[:SS]]][ BC]`, and `infinity`/`-infinity`
    /// (as `Date.distantFuture` and `Date.distantPast`). Anything else, including trailing
    /// text and fields out of range, is nil.
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> Date? {
        if text.elementsEqual("infinity".utf8) { return .distantFuture }
        if text.elementsEqual("-infinity".utf8) { return .distantPast }
        var index = 0
        func isDigit(_ at: Int) -> Bool { at < text.count && text[at] >= 48 && text[at] <= 57 }
        /// Exactly `digits` digits.
        func number(_ digits: Int) -> Int64? {
            var value: Int64 = 0
            for _ in 0..<digits {
                guard isDigit(index) else { return nil }
                value = value * 10 + Int64(text[index] - 48)
                index += 1
            }
            return value
        }
        func expect(_ character: UInt8) -> Bool {
            guard index < text.count, text[index] == character else { return false }
            index += 1
            return true
        }
        // Four digits at least; PostgreSQL writes six at most (294276), nine keeps any
        // hostile run of digits from overflowing.
        var year: Int64 = 0
        let yearStart = index
        while isDigit(index) {
            guard index - yearStart < 9 else { return nil }
            year = year * 10 + Int64(text[index] - 48)
            index += 1
        }
        guard index - yearStart >= 4, expect(45), let month = number(2), expect(45), let day = number(2),
            expect(32), let hour = number(2), expect(58), let minute = number(2), expect(58),
            let second = number(2)
        else { return nil }
        guard year >= 1, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var fraction = 0.0
        if expect(46) {
            var numerator: Int64 = 0
            var denominator: Int64 = 1
            guard isDigit(index) else { return nil }
            while isDigit(index) {
                // Digits past the ninth are below any Double's precision here; skip them.
                if denominator < 1_000_000_000 {
                    numerator = numerator * 10 + Int64(text[index] - 48)
                    denominator *= 10
                }
                index += 1
            }
            fraction = Double(numerator) / Double(denominator)
        }
        var offset: Int64 = 0
        if index < text.count, text[index] == 43 || text[index] == 45 {
            let sign: Int64 = text[index] == 45 ? -1 : 1
            index += 1
            guard let hours = number(2) else { return nil }
            var minutes: Int64 = 0
            var seconds: Int64 = 0
            if expect(58) {
                guard let value = number(2) else { return nil }
                minutes = value
                if expect(58) {
                    guard let value = number(2) else { return nil }
                    seconds = value
                }
            }
            offset = sign * (hours * 3600 + minutes * 60 + seconds)
        }
        if index < text.count {
            guard text.count - index == 3, expect(32), expect(66), expect(67) else { return nil }  // " BC"
            year = 1 - year
        }
        let days = Self.days(fromCivil: year, month, day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (astronomical year: 0 is 1 BC).
    /// Howard Hinnant's `days_from_civil` (http://howardhinnant.github.io/date_algorithms.html).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date (astronomical year) of a count of days since 1970-01-01;
    /// Howard Hinnant's `civil_from_days`, the inverse of ``days(fromCivil:_:_:)``.
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (era * 400 + yearOfEra + (month <= 2 ? 1 : 0), month, day)
    }
}
