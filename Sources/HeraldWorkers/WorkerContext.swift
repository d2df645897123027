import HeraldCore
import HeraldPostgres
import Logging

/// What a worker gets from the daemon: its own connection (shared with its queue loop,
/// which uses it only between batches), the clock, a logger, and the FCM senders every
/// sending worker shares.
public struct WorkerContext: Sendable {
    public var connection: PostgresConnection
    public var clock: any WallClock
    public var logger: Logger
    public var senders: FCMSenders?
    /// Overrides the report-reference secret kept in `herald.secrets`.
    public var reportSecret: [UInt8]?

    public init(
        connection: PostgresConnection, clock: any WallClock, logger: Logger, senders: FCMSenders? = nil,
        reportSecret: [UInt8]? = nil
    ) {
        self.connection = connection
        self.clock = clock
        self.logger = logger
        self.senders = senders
        self.reportSecret = reportSecret
    }
}
