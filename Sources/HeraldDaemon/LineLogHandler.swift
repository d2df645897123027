import Foundation
import Logging
import Synchronization

/// How `herald` writes its logs: one line per event on standard error.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `LEVEL label: message key=value …`. Under systemd (`JOURNAL_STREAM` set) each line
    /// starts with its syslog priority (`<6>`) and carries no time, which journald adds.
    case text
    /// One JSON object per line: `time`, `level`, `label`, `message`, `source` and the metadata.
    case json
}

/// A swift-log handler writing one line per event, in either ``LogFormat``. Every line
/// passes through ``LogRedaction`` first, as a net under the rule that secrets are never
/// logged.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let label: String
    let format: LogFormat
    let journald: Bool

    public init(label: String, level: Logger.Level, format: LogFormat, environment: [String: String]) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.journald = environment["JOURNAL_STREAM"] != nil
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let text = line(level: event.level, message: "\(event.message)", metadata: merged, source: event.source)
        StandardError.write(text + "\n")
    }

    /// The line for one event, redacted.
    public func line(level: Logger.Level, message: String, metadata: Logger.Metadata, source: String) -> String {
        switch format {
        case .text: return LogRedaction.redact(text(level, message, metadata))
        case .json: return LogRedaction.redact(json(level, message, metadata, source))
        }
    }

    /// Values come from outside (a push service's answer, a channel's name, a device id), so the
    /// line is made so no value can forge another: control characters are escaped (a newline
    /// would start a line of its own, and under journald `<0>` at its start is an emergency),
    /// and a field's value holding a space, `=` or `"` is quoted, as logfmt does.
    func text(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata) -> String {
        let fields = metadata.sorted { $0.key < $1.key }
            .map { "\(Self.field($0.key))=\(Self.field("\($0.value)"))" }.joined(separator: " ")
        let body = "\(level) \(label): \(Self.escapingControls(message))\(fields.isEmpty ? "" : " " + fields)"
        if journald { return "<\(Self.syslogPriority(level))>\(body)" }
        return "\(Date().formatted(.iso8601)) \(body)"
    }

    func json(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata, _ source: String) -> String {
        var object: [String: Any] = [
            "time": Date().formatted(.iso8601), "level": "\(level)", "label": label, "message": message,
            "source": source,
        ]
        for (key, value) in metadata where object[key] == nil { object[key] = Self.jsonValue(value) }
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        guard let data else { return #"{"message":"unencodable log event"}"# }
        // JSON escapes only U+0000–U+001F; DEL and the C1 controls are escaped too, as \u00XX.
        let line = String(decoding: data, as: UTF8.self)
        guard line.unicodeScalars.contains(where: Self.isControl) else { return line }
        var escaped = ""
        for scalar in line.unicodeScalars {
            if Self.isControl(scalar) {
                escaped += "\\u00" + String(scalar.value, radix: 16)
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// `text` with every control character (C0, DEL, C1) written as an escape: `\n`, `\r`,
    /// `\t`, or `\u{1b}`.
    static func escapingControls(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where isControl(scalar): escaped += "\\u{\(String(scalar.value, radix: 16))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.generalCategory == .control }

    /// A text-format key or value: as it is when plain, else quoted with `"` and `\` escaped.
    static func field(_ value: String) -> String {
        let plain =
            !value.isEmpty
            && !value.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "\\" || isControl($0) }
        if plain { return value }
        let quoted = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"\(escapingControls(quoted))\""
    }

    static func jsonValue(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible): return convertible.description
        case .array(let values): return values.map(jsonValue)
        case .dictionary(let values): return values.mapValues(jsonValue)
        }
    }

    /// sd-daemon(3)'s priority prefixes, which journald reads off each line.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }
}

/// Masks what must never reach a log, should a message or error text ever carry it: PEM
/// private keys, bearer tokens, Google access tokens and signed JWTs.
public enum LogRedaction {
    nonisolated(unsafe) static let patterns: [(Regex<Substring>, String)] = [
        (
            try! Regex(#"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"#),
            "[private key]"
        ),
        (try! Regex(#"(?i)bearer\s+[A-Za-z0-9._~+/=-]+"#), "Bearer [redacted]"),
        (try! Regex(#"ya29\.[A-Za-z0-9._-]+"#), "ya29.[redacted]"),
        (try! Regex(#"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"#), "[jwt]"),
    ]

    public static func redact(_ line: String) -> String {
        var result = line
        for (pattern, replacement) in patterns where result.contains(pattern) {
            result = result.replacing(pattern, with: replacement)
        }
        return result
    }
}

/// Whole lines to standard error, one write each, so concurrent loggers never interleave.
enum StandardError {
    static let lock = Mutex(())

    static func write(_ line: String) {
        lock.withLock { _ in
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeMutableBytes {
                    Foundation.write(2, $0.baseAddress! + offset, $0.count - offset)
                }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}
