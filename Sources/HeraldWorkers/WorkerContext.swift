import HeraldCore
import HeraldPostgres
import Logging

/// What a worker gets from the daemon: its own connection (shared with its queue loop,
/// which uses it only between batches), the clock, a logger, the FCM senders every sending
/// worker shares, and the settings of the workers that have some.
public struct WorkerContext: Sendable {
    public var connection: PostgresConnection
    public var clock: any WallClock
    public var logger: Logger
    public var senders: FCMSenders?
    /// The public base URL of Herald's HTTP endpoint (`HERALD_PUBLIC_URL`): payloads carry a
    /// report URL under it. Nil: payloads carry the reference only.
    public var publicURL: String?
    public var reconcile: ReconcileWorker.Settings

    public init(
        connection: PostgresConnection, clock: any WallClock, logger: Logger, senders: FCMSenders? = nil,
        publicURL: String? = nil, reconcile: ReconcileWorker.Settings = .init()
    ) {
        self.connection = connection
        self.clock = clock
        self.logger = logger
        self.senders = senders
        self.publicURL = publicURL
        self.reconcile = reconcile
    }
}
