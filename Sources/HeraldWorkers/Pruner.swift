import HeraldPostgres
import Logging
import ServiceLifecycle

/// Deletes finished notifications (and their deliveries) older than the retention period, so
/// the hot tables stay small and vacuum keeps up.
///
/// Each pass walks the notifications by id from the oldest, a batch per statement
/// (`herald.prune`), up to the cutoff: every statement reads at most a batch, however much
/// unfinished work (a backlog, scheduled sends) sits among the old rows, and is a short
/// transaction, so retention never holds a snapshot that stops vacuum. Then the processed
/// reports older than the cutoff go, a batch per statement, oldest first. SIGTERM cancels the
/// statement in hand; the next start prunes from the oldest again.
public struct Pruner: Service {
    /// Default retention: 7 days.
    public static let defaultRetention: Duration = .seconds(7 * 24 * 3600)
    /// How often it looks: a sixth of the retention, between 5 s and a minute. A pass deletes
    /// what finished in the interval since the last, at once, and leaves that many dead rows to
    /// vacuum; at a short retention a minute's worth is a large share of the table.
    public static func interval(retention: Duration) -> Duration {
        min(.seconds(60), max(.seconds(5), retention / 6))
    }
    /// Notifications per statement.
    public static let batchSize = 1000

    let connection: PostgresConnection
    let retention: Duration
    let logger: Logger

    public init(connection: PostgresConnection, retention: Duration = Pruner.defaultRetention, logger: Logger) {
        self.connection = connection
        self.retention = retention
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await withGracefulShutdownHandler {
                do {
                    let pruned = try await pruneAll()
                    if pruned > 0 { logger.info("pruned finished notifications", metadata: ["count": "\(pruned)"]) }
                } catch {
                    if !Task.isShuttingDownGracefully {
                        logger.error("pruning failed; will try again", metadata: ["error": "\(error)"])
                    }
                }
            } onGracefulShutdown: { [connection] in
                connection.cancel()
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.interval(retention: retention)) }
        }
    }

    /// One pass, from the oldest notification to the cutoff, then the processed reports older
    /// than it; returns how many notifications it deleted.
    @discardableResult
    public func pruneAll() async throws -> Int {
        var total = 0
        var after: Int64 = 0
        let seconds = Int(retention.components.seconds)
        while !Task.isShuttingDownGracefully {
            let step = try await connection.query(SQL.prune, [seconds, Self.batchSize, after])[0]
            total += try step.decode("deleted", as: Int.self)
            after = try step.decode("last_id", as: Int64.self)
            if try step.decode("done", as: Bool.self) { break }
        }
        while !Task.isShuttingDownGracefully {
            let reports = try await connection.query(SQL.pruneReports, [seconds, Self.batchSize])[0]
            if try reports.decode(0, as: Int.self) < Self.batchSize { break }
        }
        return total
    }

    enum SQL {
        /// One step of a pass: reads the $2 notifications after id $3, deletes those finished and
        /// older than $1 seconds with their deliveries (`herald.prune`,
        /// `migrations/functions/retention.sql`); returns how many, the last id read, and whether
        /// the pass is done.
        static let prune = "SELECT deleted, last_id, done FROM herald.prune(make_interval(secs => $1), $2, $3)"
        /// Deletes up to $2 reports processed more than $1 seconds ago; returns how many.
        static let pruneReports = "SELECT herald.prune_reports(make_interval(secs => $1), $2)"
    }
}
