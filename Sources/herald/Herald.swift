import ArgumentParser
import Foundation
import HeraldDaemon
import HeraldPostgres
import HeraldSchema
import HeraldStatus
import Logging
import Metrics
import Prometheus

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "Push-notification delivery daemon with a PostgreSQL job queue.",
        discussion: "Settings come from HERALD_* environment variables and an optional file; see `herald config`.",
        version: HeraldVersion.current,
        subcommands: [Run.self, Migrate.self, Status.self, ConfigCommand.self, VAPIDKeyCommand.self]
    )
}

/// Options every command shares.
struct CommonOptions: ParsableArguments {
    @Option(name: .long, help: "A file of NAME=value settings (the environment wins over it).")
    var config: String?

    @Option(name: .long, help: "Log lines as text (journald-friendly) or json; overrides HERALD_LOG_FORMAT.")
    var logFormat: LogFormat?

    func load() throws -> Configuration {
        var configuration = try Configuration.load(environment: ProcessInfo.processInfo.environment, file: config)
        if let logFormat { configuration.logFormat = logFormat }
        return configuration
    }
}

extension LogFormat: ExpressibleByArgument {}

/// Sets up swift-log once per process: one line per event on standard error.
func bootstrapLogging(_ configuration: Configuration) -> Logger {
    let environment = ProcessInfo.processInfo.environment
    LoggingSystem.bootstrap { label in
        LineLogHandler(
            label: label, level: configuration.logLevel, format: configuration.logFormat, environment: environment)
    }
    return Logger(label: "herald")
}

/// Prints an error for a person and exits non-zero, without a stack of Swift types.
func fail(_ error: any Error) -> ExitCode {
    FileHandle.standardError.write(Data("herald: \(error)\n".utf8))
    return ExitCode.failure
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the workers until SIGTERM or SIGINT, then drain and exit.")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        let configuration: Configuration
        do { configuration = try options.load() } catch { throw fail(error) }
        let logger = bootstrapLogging(configuration)
        let metrics = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: metrics)
        // A provider's receipt comes seconds to hours after the commit, not milliseconds.
        factory.durationHistogramBuckets["herald_receipt_delay_seconds"] = [
            1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600,
        ].map { .seconds($0) }
        MetricsSystem.bootstrap(factory)
        do {
            try await Daemon(configuration: configuration, logger: logger, metrics: metrics).run()
        } catch {
            logger.critical("herald cannot run: \(error)")
            throw ExitCode.failure
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Apply the schema migrations and function files this binary carries; running it again changes nothing.")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        do {
            let configuration = try options.load()
            let logger = bootstrapLogging(configuration)
            let connection = try await PostgresConnection.connect(configuration.databaseURL, logger: logger)
            let applied = try await Migrator(logger: logger).migrate(connection)
            if applied.isEmpty { print("schema is up to date") }
            if applied.fromBaseline, let last = applied.versions.last {
                print("made a new database's schema from the baseline (as after migration \(last))")
            } else if !applied.versions.isEmpty {
                print("applied migrations: \(applied.versions.map(String.init).joined(separator: ", "))")
            }
            if !applied.functionFiles.isEmpty {
                print("applied function files: \(applied.functionFiles.joined(separator: ", "))")
            }
        } catch {
            throw fail(error)
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print queue depth by kind and state; exits 1 when something needs attention.")

    @OptionGroup var options: CommonOptions

    @Flag(help: "Print JSON for scripts.")
    var json = false

    @Option(help: "Seconds a ready job may wait before status reports a backlog.")
    var maxReadyAge: Double = 300

    func run() async throws {
        let status: StatusReport
        do {
            let configuration = try options.load()
            // A read-only server is reported, not refused: an operator may point this at any of them.
            let connection = PostgresConnection(
                conninfo: configuration.databaseURL, link: DatabaseLink(logger: Logger(label: "herald.status")),
                acceptsReadOnlyServers: true)
            status = try await StatusReport.load(connection)
        } catch {
            throw fail(error)
        }
        let problems = status.problems(maximumReadyAge: maxReadyAge)
        if json {
            struct Output: Encodable {
                var queues: [StatusReport.Kind]
                var database: StatusReport.Database?
                var problems: [String]
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(
                String(
                    decoding: try encoder.encode(
                        Output(queues: status.kinds, database: status.database, problems: problems)), as: UTF8.self))
        } else {
            print(status.table())
            print(
                problems.isEmpty
                    ? "\nall well" : "\nneeds attention:\n" + problems.map { "  - \($0)" }.joined(separator: "\n"))
        }
        if !problems.isEmpty { throw ExitCode(1) }
    }
}

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "List every setting with its default, and check the current ones.")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        // As wide as the longest name: padding(toLength:) also cuts a longer one short.
        let width = Configuration.settings.map(\.name.count).max() ?? 0
        for setting in Configuration.settings {
            print(
                "\(setting.name.padding(toLength: width, withPad: " ", startingAt: 0)) default \(setting.defaultValue): \(setting.meaning)"
            )
        }
        do {
            _ = try options.load()
            print("\ncurrent settings are valid")
        } catch {
            throw fail(error)
        }
    }
}
