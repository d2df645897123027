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

    func text(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata) -> String {
        let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let body = "\(level) \(label): \(message)\(fields.isEmpty ? "" : " " + fields)"
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
        return data.map { String(decoding: $0, as: UTF8.self) } ?? #"{"message":"unencodable log event"}"#
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
