import Foundation
import HeraldEndpoint
import HeraldFCM
import HeraldQueue
import HeraldWorkers
import Logging

/// Every setting of the daemon, read from the environment and an optional file.
///
/// The file (`--config PATH` or `HERALD_CONFIG`) uses the environment-file format that
/// systemd's `EnvironmentFile=` reads: `NAME=value` lines, `#` comments. The environment
/// wins over the file. A bad value is an error that names the setting; nothing starts.
public struct Configuration: Sendable {
    /// libpq connection string; empty means libpq's defaults and the `PG*` variables.
    public var databaseURL: String = ""
    public var logLevel: Logger.Level = .info
    public var logFormat: LogFormat = .text
    /// Written into `herald.jobs.locked_by`; default `<hostname>:<pid>`.
    public var workerID: String = Configuration.defaultWorkerID
    /// Which workers `herald run` starts: `all`, or a comma-separated list of names.
    public var workers: [String] = ["all"]
    /// The largest claim; claims adapt below it to the queue's depth.
    public var batchSize: Int = BatchSizer.defaultCap
    /// Loops per worker, each claiming its own batches on its own connection, so that one
    /// batch's database work overlaps another's sending.
    public var concurrency: Int = 2
    public var pollInterval: Duration = .seconds(2)
    public var lease: Duration = JobQueue.defaultLease
    public var rescueInterval: Duration = RetryWorker.defaultInterval
    public var backoffBase: Duration = Backoff.defaultBase
    public var backoffCap: Duration = Backoff.defaultCap
    /// How long finished notifications are kept.
    public var retention: Duration = Pruner.defaultRetention
    /// The span of time one generation (one partition of each hot table) covers.
    public var partitionInterval: Duration = Pruner.defaultPartitionInterval
    /// The most generations a retention may keep (HERALD_RETENTION / HERALD_PARTITION_INTERVAL).
    public static let maximumGenerations = 30
    /// Apply missing migrations at startup instead of refusing to start.
    public var autoMigrate: Bool = false
    /// A CA bundle to trust for every provider request (FCM, OAuth tokens, Web Push services:
    /// a TLS stand-in); nil: the system's.
    public var caBundle: String?
    /// A stand-in's base URL for a provider, by its name: `HERALD_FCM_ENDPOINT` (`fcm`),
    /// `HERALD_APNS_ENDPOINT` (`apns`), `HERALD_APNS_CHANNELS_ENDPOINT` (`apns_channels`, APNs'
    /// channel management) and `HERALD_PROVIDER_ENDPOINTS` for the rest
    /// (`hms=http://127.0.0.1:8089`). A provider without one sends to its own servers.
    public var providerEndpoints: [String: String] = [:]
    /// The endpoints with a setting of their own, by the key of ``providerEndpoints`` they fill.
    static let endpointSettings = [
        "fcm": "HERALD_FCM_ENDPOINT", "apns": "HERALD_APNS_ENDPOINT", "apns_channels": "HERALD_APNS_CHANNELS_ENDPOINT",
    ]
    /// Whether it sends to UnifiedPush distributors, servers anyone can run (a hostile one fails
    /// only its own phones' deliveries: `HostileServerTests`). Default on.
    public var unifiedPush = true
    /// Sends per second per FCM project, for every daemon on the database together.
    public var fcmRateLimit: Double = FCMQuota.defaultRate
    /// Where the HTTP endpoint (reports, pending fetch, health) listens; nil: turned off.
    public var httpAddress: (host: String, port: Int)? = ("127.0.0.1", 8480)
    /// Where Prometheus scrapes `/metrics`; nil: turned off.
    public var metricsAddress: (host: String, port: Int)? = ("127.0.0.1", 9480)
    /// The endpoint's public base URL, for the report URL in payloads; nil: no URL in payloads.
    public var publicURL: String?
    /// How long a client may take to send a request to the endpoint.
    public var httpTimeout: Duration = Endpoint.Settings(host: "", port: 0).timeout
    public var reconcile = ReconcileWorker.Settings()
    /// The service-account file for apps without their own (`GOOGLE_APPLICATION_CREDENTIALS`).
    public var defaultCredentialsFile: String?

    public init() {}

    public static var defaultWorkerID: String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// Every setting: its name, default and meaning. Each default is the value a fresh
    /// `Configuration` holds, printed as the setting is written; `herald config`,
    /// `docs/configuration.md` and `deploy/herald.env` show the same (a test compares them).
    public static let settings: [(name: String, defaultValue: String, meaning: String)] = {
        let defaults = Configuration()
        let duration = SettingReader.format
        func address(_ address: (host: String, port: Int)?) -> String {
            address.map { "\($0.host):\($0.port)" } ?? "off"
        }
        return [
            ("HERALD_DATABASE_URL", "(libpq defaults, PG* variables)", "libpq connection string or postgresql:// URL"),
            ("HERALD_LOG_LEVEL", defaults.logLevel.rawValue, "trace, debug, info, notice, warning, error or critical"),
            ("HERALD_LOG_FORMAT", defaults.logFormat.rawValue, "text (journald-friendly) or json, one line per event"),
            ("HERALD_WORKER_ID", "<hostname>:<pid>", "name recorded in locked_by"),
            (
                "HERALD_WORKERS", defaults.workers.joined(separator: ","),
                "workers to run: all, or a comma-separated list (ingest, dispatch, reconcile, retry, channels)"
            ),
            (
                "HERALD_BATCH_SIZE", "\(defaults.batchSize)",
                "the largest claim (1 to 10000); claims start at 10 and double while the queue keeps them full"
            ),
            (
                "HERALD_CONCURRENCY", "\(defaults.concurrency)",
                "loops per worker, each with its own connection (1 to 64)"
            ),
            ("HERALD_POLL_INTERVAL", duration(defaults.pollInterval), "longest wait between claims without a NOTIFY"),
            ("HERALD_LEASE", duration(defaults.lease), "how long a claim stays leased"),
            (
                "HERALD_RESCUE_INTERVAL", duration(defaults.rescueInterval),
                "how often the retry worker rescues expired job leases and ends hopeless retries"
            ),
            ("HERALD_BACKOFF_BASE", duration(defaults.backoffBase), "ceiling of the first retry's delay (full jitter)"),
            ("HERALD_BACKOFF_CAP", duration(defaults.backoffCap), "largest retry delay"),
            (
                "HERALD_RETENTION", duration(defaults.retention),
                "how long finished notifications and deliveries are kept"
            ),
            (
                "HERALD_PARTITION_INTERVAL", duration(defaults.partitionInterval),
                "the span of time each partition of notifications and deliveries covers; retention drops whole ones"
            ),
            ("HERALD_AUTO_MIGRATE", "\(defaults.autoMigrate)", "apply missing migrations when the daemon starts"),
            ("HERALD_FCM_ENDPOINT", FCMClient.defaultEndpoint, "FCM's base URL (the emulator's, for tests and demos)"),
            (
                "HERALD_CA_BUNDLE", "(system CAs)",
                "PEM file of CAs to trust for FCM, token and Web Push requests (a TLS stand-in's)"
            ),
            (
                "HERALD_APNS_ENDPOINT", "(Apple's)",
                "APNs' base URL for every app (the emulator's, for tests and demos); unset: each app's environment (herald.app_apns)"
            ),
            (
                "HERALD_APNS_CHANNELS_ENDPOINT", "(Apple's)",
                "APNs' channel-management base URL for every app (the emulator's); unset: each app's environment (herald.app_apns)"
            ),
            (
                "HERALD_PROVIDER_ENDPOINTS", "(the providers')",
                "provider=base URL, comma-separated: a stand-in for a provider without a setting of its own (hms=…, the emulator's)"
            ),
            (
                "HERALD_UNIFIEDPUSH", "\(defaults.unifiedPush)",
                "send to UnifiedPush distributors (servers anyone can run); until it is on, those deliveries wait"
            ),
            (
                "HERALD_FCM_RATE_LIMIT", "\(Int(defaults.fcmRateLimit))",
                "sends per second per FCM project, all daemons together (FCM allows 600,000 a minute);"
                    + " herald.fcm_quotas.per_second sets one project's"
            ),
            (
                "HERALD_HTTP_ADDRESS", address(defaults.httpAddress),
                "host:port of the report, pending-fetch and health endpoint; off to turn it off"
            ),
            (
                "HERALD_METRICS_ADDRESS", address(defaults.metricsAddress),
                "host:port serving /metrics for Prometheus; off to turn it off"
            ),
            ("HERALD_PUBLIC_URL", "(none)", "the endpoint's public base URL; payloads then carry herald_report_url"),
            (
                "HERALD_HTTP_TIMEOUT", duration(defaults.httpTimeout),
                "how long a request body may take to arrive; idle connections close after twice this"
            ),
            (
                "HERALD_WAKEUP_INTERVAL", duration(defaults.reconcile.quietPeriod),
                "least time between two wake-ups of one iOS device"
            ),
            (
                "HERALD_WAKEUP_GRACE", duration(defaults.reconcile.grace),
                "a delivery sent more recently than this does not count as missed yet"
            ),
        ]
    }()

    /// Settings renamed since, still read under their former names (the new name wins).
    public static let formerNames = ["HERALD_FCM_CA_BUNDLE": "HERALD_CA_BUNDLE"]

    /// Reads the settings from `environment`, over the file named by `file` (or by
    /// `HERALD_CONFIG` in the environment) when there is one.
    public static func load(environment: [String: String], file: String? = nil) throws -> Configuration {
        var values: [String: String] = [:]
        if let path = file ?? environment["HERALD_CONFIG"], !path.isEmpty {
            values = try readEnvironmentFile(path)
        }
        values.merge(environment.filter { $0.key.hasPrefix("HERALD_") }) { _, fromEnvironment in fromEnvironment }

        for (former, name) in formerNames where values[name] == nil {
            values[name] = values[former]
        }
        let known = Set(settings.map(\.name) + formerNames.keys + ["HERALD_CONFIG"])
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) && isHeraldSetting($0) }) {
            throw ConfigurationError(setting: unknown, message: "is not a Herald setting (see herald config)")
        }

        var configuration = Configuration()
        let reader = SettingReader(values: values)
        configuration.databaseURL = reader.string("HERALD_DATABASE_URL") ?? ""
        if let level = reader.string("HERALD_LOG_LEVEL") {
            guard let parsed = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError(setting: "HERALD_LOG_LEVEL", message: "\"\(level)\" is not a log level")
            }
            configuration.logLevel = parsed
        }
        if let format = reader.string("HERALD_LOG_FORMAT") {
            guard let parsed = LogFormat(rawValue: format.lowercased()) else {
                throw ConfigurationError(setting: "HERALD_LOG_FORMAT", message: "\"\(format)\" is not text or json")
            }
            configuration.logFormat = parsed
        }
        configuration.workerID = reader.string("HERALD_WORKER_ID") ?? configuration.workerID
        if let workers = reader.string("HERALD_WORKERS") {
            configuration.workers = workers.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        configuration.batchSize = try reader.integer("HERALD_BATCH_SIZE", in: 1...10_000) ?? configuration.batchSize
        configuration.concurrency = try reader.integer("HERALD_CONCURRENCY", in: 1...64) ?? configuration.concurrency
        configuration.pollInterval = try reader.duration("HERALD_POLL_INTERVAL") ?? configuration.pollInterval
        configuration.lease = try reader.duration("HERALD_LEASE") ?? configuration.lease
        configuration.rescueInterval = try reader.duration("HERALD_RESCUE_INTERVAL") ?? configuration.rescueInterval
        configuration.backoffBase = try reader.duration("HERALD_BACKOFF_BASE") ?? configuration.backoffBase
        configuration.backoffCap = try reader.duration("HERALD_BACKOFF_CAP") ?? configuration.backoffCap
        configuration.retention = try reader.duration("HERALD_RETENTION") ?? configuration.retention
        configuration.partitionInterval =
            try reader.duration("HERALD_PARTITION_INTERVAL") ?? configuration.partitionInterval
        guard configuration.partitionInterval >= .seconds(1) else {
            throw ConfigurationError(
                setting: "HERALD_PARTITION_INTERVAL", message: "must be at least 1s: each interval makes two tables")
        }
        // Every claim reads (and locks) each generation's partitions and their indexes.
        guard configuration.retention / configuration.partitionInterval <= Double(Self.maximumGenerations) else {
            throw ConfigurationError(
                setting: "HERALD_PARTITION_INTERVAL",
                message:
                    "must be at least a \(Self.maximumGenerations)th of HERALD_RETENTION (\(SettingReader.format(configuration.retention))):"
                    + " every claim reads each generation's partitions")
        }
        configuration.autoMigrate = try reader.boolean("HERALD_AUTO_MIGRATE") ?? configuration.autoMigrate
        configuration.caBundle = reader.string("HERALD_CA_BUNDLE")
        for (provider, setting) in Self.endpointSettings {
            if let endpoint = reader.string(setting) { configuration.providerEndpoints[provider] = endpoint }
        }
        for entry in (reader.string("HERALD_PROVIDER_ENDPOINTS") ?? "").split(separator: ",") {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty, parts[1].hasPrefix("http://") || parts[1].hasPrefix("https://")
            else {
                throw ConfigurationError(
                    setting: "HERALD_PROVIDER_ENDPOINTS",
                    message: "\"\(entry)\" is not provider=base URL (hms=http://127.0.0.1:8089)")
            }
            // FCM and APNs have settings of their own; a name no provider has is a typo, which
            // would leave that provider's real endpoint in use.
            let own = Self.endpointSettings
            guard own[parts[0]] == nil, Senders.providerNames.contains(parts[0]) else {
                throw ConfigurationError(
                    setting: "HERALD_PROVIDER_ENDPOINTS",
                    message: own[parts[0]].map { "\(parts[0]) has its own setting: \($0)" }
                        ?? "no provider is named \(parts[0]) (there are \(Senders.providerNames.sorted().joined(separator: ", ")))"
                )
            }
            configuration.providerEndpoints[parts[0]] = parts[1]
        }
        configuration.unifiedPush = try reader.boolean("HERALD_UNIFIEDPUSH") ?? configuration.unifiedPush
        if let rate = reader.string("HERALD_FCM_RATE_LIMIT") {
            guard let value = Double(rate), value > 0 else {
                throw ConfigurationError(
                    setting: "HERALD_FCM_RATE_LIMIT", message: "\"\(rate)\" is not a positive number")
            }
            configuration.fcmRateLimit = value
        }
        if let address = reader.string("HERALD_HTTP_ADDRESS") {
            configuration.httpAddress = try Self.parseAddress(address, setting: "HERALD_HTTP_ADDRESS")
        }
        if let address = reader.string("HERALD_METRICS_ADDRESS") {
            configuration.metricsAddress = try Self.parseAddress(address, setting: "HERALD_METRICS_ADDRESS")
        }
        if let url = reader.string("HERALD_PUBLIC_URL") {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil
            else {
                throw ConfigurationError(setting: "HERALD_PUBLIC_URL", message: "\"\(url)\" is not an http(s) URL")
            }
            configuration.publicURL = url
        }
        configuration.httpTimeout = try reader.duration("HERALD_HTTP_TIMEOUT") ?? configuration.httpTimeout
        configuration.reconcile.quietPeriod =
            try reader.duration("HERALD_WAKEUP_INTERVAL") ?? configuration.reconcile.quietPeriod
        configuration.reconcile.grace = try reader.duration("HERALD_WAKEUP_GRACE") ?? configuration.reconcile.grace
        configuration.defaultCredentialsFile = environment["GOOGLE_APPLICATION_CREDENTIALS"].flatMap {
            $0.isEmpty ? nil : $0
        }
        if configuration.lease < .seconds(1) {
            throw ConfigurationError(setting: "HERALD_LEASE", message: "must be at least 1s")
        }
        return configuration
    }

    /// `host:port`, or `off`.
    static func parseAddress(_ text: String, setting: String) throws -> (host: String, port: Int)? {
        if ["off", "none", "false"].contains(text.lowercased()) { return nil }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port), colon != text.startIndex
        else {
            throw ConfigurationError(setting: setting, message: "\"\(text)\" is not host:port (or off)")
        }
        return (String(text[..<colon]), port)
    }

    private static func isHeraldSetting(_ name: String) -> Bool { name.hasPrefix("HERALD_") }

    /// Reads `NAME=value` lines; blank lines and `#` comments are skipped, and a value may be
    /// wrapped in single or double quotes.
    static func readEnvironmentFile(_ path: String) throws -> [String: String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError(setting: "HERALD_CONFIG", message: "cannot read the file \(path)")
        }
        var values: [String: String] = [:]
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(
                    setting: "HERALD_CONFIG", message: "line \(number + 1) of \(path) is not NAME=value")
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            values[name] = value
        }
        return values
    }
}

/// A setting with a value Herald cannot use.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var setting: String
    public var message: String
    public var description: String { "configuration error: \(setting) \(message)" }
}

/// Parses typed values out of the raw strings, naming the setting in every error.
struct SettingReader {
    let values: [String: String]

    func string(_ name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = string(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigurationError(
                setting: name,
                message: "\"\(text)\" is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    func boolean(_ name: String) throws -> Bool? {
        guard let text = string(name) else { return nil }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(setting: name, message: "\"\(text)\" is not true or false")
        }
    }

    /// A duration such as `250ms`, `2s`, `5m`, `1h`; a bare number is seconds.
    func duration(_ name: String) throws -> Duration? {
        guard let text = string(name) else { return nil }
        guard let duration = Self.parseDuration(text) else {
            throw ConfigurationError(
                setting: name, message: "\"\(text)\" is not a duration such as 500ms, 2s, 5m or 1h")
        }
        return duration
    }

    /// A duration as a setting would say it, in the largest unit that keeps it whole.
    static func format(_ duration: Duration) -> String {
        let milliseconds = Int64(duration.seconds * 1000)
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)]
        where milliseconds >= size && milliseconds % size == 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    static func parseDuration(_ text: String) -> Duration? {
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        var number = Substring(text.lowercased())
        var scale = 1.0
        for unit in units where number.hasSuffix(unit.suffix) {
            number = number.dropLast(unit.suffix.count)
            scale = unit.seconds
            break
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }
}
