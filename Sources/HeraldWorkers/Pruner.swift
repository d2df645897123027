import HeraldPostgres
import Logging
import ServiceLifecycle

/// Deletes finished notifications (and their deliveries) older than the retention period, in
/// bounded batches, so the hot tables stay small and vacuum keeps up.
public struct Pruner: Service {
    /// Default retention: 7 days.
    public static let defaultRetention: Duration = .seconds(7 * 24 * 3600)
    /// How often it looks. Default 1 minute.
    public static let interval: Duration = .seconds(60)
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
            do {
                let pruned = try await pruneAll()
                if pruned > 0 { logger.info("pruned finished notifications", metadata: ["count": "\(pruned)"]) }
            } catch {
                logger.error("pruning failed; will try again", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.interval) }
        }
    }

    /// Prunes in batches until a batch comes back short; returns how many it deleted.
    @discardableResult
    public func pruneAll() async throws -> Int {
        var total = 0
        let seconds = Int(retention.components.seconds)
        while !Task.isShuttingDownGracefully {
            let deleted = try await connection.query(SQL.prune, [seconds, Self.batchSize])[0].decode(0, as: Int.self)
            total += deleted
            if deleted < Self.batchSize { break }
        }
        return total
    }

    enum SQL {
        /// Deletes up to $2 finished notifications older than $1 seconds, with their deliveries
        /// (`herald.prune`, `migrations/functions/retention.sql`); returns how many.
        static let prune = "SELECT herald.prune(make_interval(secs => $1), $2)"
    }
}
