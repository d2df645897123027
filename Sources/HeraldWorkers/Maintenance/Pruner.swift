import HeraldCore
import HeraldPostgres
import Logging
import ServiceLifecycle

/// Keeps the hot tables to the retention: `herald.notifications`, `herald.deliveries` and the
/// deliveries' reports are partitioned by generation (a span of ids that is a span of time,
/// migrations 020 and 022), and retention drops whole generations instead of deleting rows.
///
/// Each pass:
/// 1. makes the generations ahead and opens the next one when the open one is a partition
///    interval old (`herald.open_generation`);
/// 2. retires each generation that closed more than the retention ago: its rows that still wait
///    (scheduled, backing off, dead, not yet ingested or applied) move to the kept partitions,
///    ids unchanged (`herald.retire_generation`), and its partitions are dropped, the deliveries'
///    with their reports, the notifications' in a transaction of its own
///    (`herald.drop_generation`). A table is locked to drop its partition only in a
///    moment no statement uses it; after `passesBeforeQueueing` passes that found none, the
///    pass queues for the lock, at most `queueForLock`, which every statement then waits behind;
/// 3. once a partition interval, deletes the finished kept rows older than the retention,
///    walking them by id a batch per statement (`herald.prune`, `herald.prune_orphans`); then
///    the kept reports, idempotency keys and wake-ups older than it (`herald.prune_records`).
/// Every statement is a short transaction, so retention never holds a snapshot that stops
/// vacuum. One daemon at a time makes and drops partitions (the `generations` row of
/// `herald.worker_locks`, which no producer can lock); the others skip
/// that part. SIGTERM cancels the statement in hand.
///
/// Its one starter is the daemon: every `herald run` runs one, whatever `HERALD_WORKERS` names,
/// on a connection of its own (retention is every deployment's, and a pass waits on locks no
/// worker's batch should wait behind). The other maintenance passes are the retry worker's
/// (``RetryWorker``).
public struct Pruner: Service {
    /// Default retention: 7 days.
    public static let defaultRetention: Duration = .seconds(7 * 24 * 3600)
    /// Default span of a generation: a day, so a week's retention keeps eight.
    public static let defaultPartitionInterval: Duration = .seconds(24 * 3600)
    /// Generations made ahead of the open one, 4 billion ids each: rows flow on into them
    /// should no pass run for a long time, so a missed pass never leaves a row without its
    /// partition.
    public static let generationsAhead = 2
    /// How often it looks: a sixth of the retention or of the partition interval, whichever is
    /// shorter, between 5 s and a minute.
    public static func interval(retention: Duration, partitionInterval: Duration = defaultPartitionInterval) -> Duration
    {
        min(.seconds(60), max(.seconds(5), min(retention, partitionInterval) / 6))
    }
    /// Kept notifications per statement.
    public static let batchSize = 1000
    /// Passes in a row that found a table never free to drop its partition, after which the
    /// next one queues for the lock: a table under constant load has no free moment.
    public static let passesBeforeQueueing = 2
    /// How long a pass queues for that lock, holding up every statement on the table as long.
    public static let queueForLock: Duration = .milliseconds(100)

    let connection: PostgresConnection
    let retention: Duration
    let partitionInterval: Duration
    let logger: Logger
    /// The elapsed time: the pause between passes, and when the kept rows were last walked.
    let clock: any MonotonicClock

    public init(
        connection: PostgresConnection, retention: Duration = Pruner.defaultRetention,
        partitionInterval: Duration = Pruner.defaultPartitionInterval, logger: Logger,
        clock: any MonotonicClock = ContinuousClock()
    ) {
        self.connection = connection
        self.retention = retention
        self.partitionInterval = partitionInterval
        self.logger = logger
        self.clock = clock
    }

    public func run() async throws {
        var keptPrunedAt: ContinuousClock.Instant?
        var passesLockedOut = 0
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await withGracefulShutdownHandler {
                // The kept rows are walked whole, so once a partition interval.
                let pruneKept = keptPrunedAt.map { clock.now - $0 >= partitionInterval } ?? true
                let queueFor = passesLockedOut >= Self.passesBeforeQueueing ? Self.queueForLock : nil
                let done = await pass(pruneKept: pruneKept, queueFor: queueFor)
                passesLockedOut = done.lockedOut ? passesLockedOut + 1 : 0
                if pruneKept { keptPrunedAt = clock.now }
            } onGracefulShutdown: { [connection] in
                connection.cancel()
            }
            try? await cancelWhenGracefulShutdown {
                try await clock.sleep(for: Self.interval(retention: retention, partitionInterval: partitionInterval))
            }
        }
    }

    /// What one pass did.
    public struct Pass: Equatable, Sendable {
        /// Generations dropped, oldest first.
        public var retired: [Int] = []
        /// Rows of those generations moved to the kept partitions.
        public var keptNotifications = 0
        public var keptDeliveries = 0
        public var keptReports = 0
        /// A generation waits for a later pass: a table was never free to drop its partition.
        public var lockedOut = false
        /// Kept notifications deleted.
        public var pruned = 0
        /// Steps that failed (logged); the others still ran.
        public var failed = 0
    }

    /// One pass: generations opened and retired, then the kept rows (unless `pruneKept` is
    /// false) and the other tables pruned. A step that fails is logged and the next one runs:
    /// a generation that cannot be dropped now holds back no other retention. A table never
    /// free for half a second is queued for, up to `queueFor`, or not at all when it is nil.
    @discardableResult
    public func pass(pruneKept: Bool = true, queueFor: Duration? = nil) async -> Pass {
        var done = Pass()
        let seconds = Int(retention.components.seconds)
        func step(_ name: String, _ body: () async throws -> Void) async {
            guard !Task.isShuttingDownGracefully else { return }
            do {
                try await body()
            } catch {
                done.failed += 1
                if !Task.isShuttingDownGracefully {
                    logger.error(
                        "retention failed; will try again", metadata: ["step": "\(name)", "error": "\(error)"])
                }
            }
        }
        // Calls a statement that deletes up to a batch again while it deletes a whole one.
        func untilShort(_ sql: String) async throws {
            while !Task.isShuttingDownGracefully,
                try await connection.query(sql, [seconds, Self.batchSize])[0].decode(0, as: Int.self) == Self.batchSize
            {}
        }
        await step("open a generation") {
            try await connection.query(SQL.openGeneration, [partitionInterval.seconds, Self.generationsAhead])
        }
        await step("retire a generation") {
            while !Task.isShuttingDownGracefully {
                let retired = try await connection.query(SQL.retireGeneration, [seconds])[0]
                guard let generation = try retired.decode("generation", as: Int?.self) else { return }
                let notifications = try retired.decode("kept_notifications", as: Int.self)
                let deliveries = try retired.decode("kept_deliveries", as: Int.self)
                let reports = try retired.decode("kept_reports", as: Int.self)
                done.keptNotifications += notifications
                done.keptDeliveries += deliveries
                done.keptReports += reports
                // Deliveries (with their reports) first: a notification is kept for any delivery
                // that still waits.
                for hot in ["deliveries", "notifications"] {
                    let dropped: Bool
                    do {
                        dropped = try await connection.query(
                            SQL.dropGeneration, [generation, hot, seconds, queueFor?.seconds]
                        )[0].decode(0, as: Bool.self)
                    } catch let error as PostgresError where error.sqlState == "55P03" {
                        done.lockedOut = true
                        // Who kept it busy, as herald status names them: a transaction left open
                        // holds the partitions it touched until it ends.
                        let holders =
                            (try? await connection.query(SQL.lockHolders).map {
                                try $0.decode(0, as: String.self)
                            }) ?? []
                        logger.notice(
                            "a table was never free to drop a generation's partition; a later pass tries again",
                            metadata: [
                                "generation": "\(generation)", "table": "\(hot)", "error": "\(error)",
                                "sessions_holding_transactions_open": "\(holders.joined(separator: "; "))",
                            ])
                        return
                    }
                    if !dropped {
                        logger.notice(
                            "a generation is left for a later pass: a row in it started waiting, or another daemon retires it",
                            metadata: ["generation": "\(generation)", "table": "\(hot)"])
                        return
                    }
                }
                done.retired.append(generation)
                logger.info(
                    "retired a generation of notifications, deliveries and reports",
                    metadata: [
                        "generation": "\(generation)", "kept_notifications": "\(notifications)",
                        "kept_deliveries": "\(deliveries)", "kept_reports": "\(reports)",
                    ])
            }
        }
        if pruneKept {
            await step("prune kept rows") {
                var after: Int64 = 0
                while !Task.isShuttingDownGracefully {
                    let step = try await connection.query(SQL.prune, [seconds, Self.batchSize, after])[0]
                    done.pruned += try step.decode("deleted", as: Int.self)
                    after = try step.decode("last_id", as: Int64.self)
                    if try step.decode("done", as: Bool.self) { break }
                }
                try await untilShort(SQL.pruneOrphans)
            }
            if done.pruned > 0 { logger.info("pruned kept notifications", metadata: ["count": "\(done.pruned)"]) }
        }
        await step("prune records") { try await untilShort(SQL.pruneRecords) }
        return done
    }

    enum SQL {
        /// Makes the $2 generations ahead and opens the next when the open one is $1 seconds old
        /// (`herald.open_generation`, `migrations/functions/retention.sql`).
        static let openGeneration = "SELECT herald.open_generation(make_interval(secs => $1), $2)"
        /// Keeps what still waits in the oldest generation closed more than $1 seconds ago, if any.
        static let retireGeneration =
            "SELECT generation, kept_notifications, kept_deliveries, kept_reports FROM herald.retire_generation(make_interval(secs => $1))"
        /// Drops generation $1's partition of table $2 unless a row in it started waiting (false);
        /// dead within $3 seconds counts as waiting. Queues for the table's lock for $4 seconds
        /// when it is never free (NULL: not at all).
        static let dropGeneration =
            "SELECT herald.drop_generation($1, $2, make_interval(secs => $3), make_interval(secs => $4))"
        /// The sessions holding up the workers (`herald.lock_holders`), each in words.
        static let lockHolders = """
            SELECT format('pid %s (role %s, application %s, %s, transaction open since %s)', pid, role,
                          quote_literal(application_name), state, transaction_since)
            FROM herald.lock_holders ORDER BY transaction_since
            """
        /// Deletes up to $2 kept deliveries whose notification is gone, finished more than $1 s ago.
        static let pruneOrphans = "SELECT herald.prune_orphans(make_interval(secs => $1), $2)"
        /// One step over the kept notifications: reads the $2 after id $3, deletes those finished
        /// and older than $1 seconds with their kept deliveries (`herald.prune`); returns how many,
        /// the last id read, and whether the pass is done.
        static let prune = "SELECT deleted, last_id, done FROM herald.prune(make_interval(secs => $1), $2, $3)"
        /// Deletes up to $2 reports, idempotency keys and wake-ups older than $1 seconds from each
        /// table; returns the most from one.
        static let pruneRecords = "SELECT herald.prune_records(make_interval(secs => $1), $2)"
    }
}
