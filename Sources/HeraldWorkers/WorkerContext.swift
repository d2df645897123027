import HeraldCore
import HeraldPostgres
import Logging

/// What a worker gets from the daemon: its own connection (shared with its queue loop,
/// which uses it only between batches), the clock and a logger.
public struct WorkerContext: Sendable {
    public var connection: PostgresConnection
    public var clock: any WallClock
    public var logger: Logger

    public init(connection: PostgresConnection, clock: any WallClock, logger: Logger) {
        self.connection = connection
        self.clock = clock
        self.logger = logger
    }
}
