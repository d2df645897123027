import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

/// Turns new notifications into deliveries, a batch at a time: one call to
/// `herald.ingest_next` (in `migrations/functions/ingest.sql`) takes the
/// oldest notifications still `received`, skipping those another ingester holds, and in the
/// same transaction rejects bad ones with their reason and fans the rest out to one queued
/// delivery per enabled device.
///
/// The notifications are the queue: no job rows, and no lease, since a crash rolls the whole
/// step back and leaves them `received`.
///
/// When the daemon also dispatches, some of the deliveries are created leased to it, and their
/// ids handed straight to its dispatch (``BirthLeases``), whose claim reads them: as many as
/// there is room for.
public struct IngestWorker: BatchWorker {
    public let kind = WorkerKind.ingest.rawValue
    let context: WorkerContext
    private let claimTimer = StatementTimer(kind: WorkerKind.ingest.rawValue, .claim)

    /// At most one catch-up message per device per this (`HERALD_WAKEUP_INTERVAL`, the reconcile
    /// worker's wake-up interval: ``ReconcileWorker/Settings/quietPeriod``).
    let catchUpInterval: Duration

    public init(context: WorkerContext, catchUpInterval: Duration = ReconcileWorker.Settings().quietPeriod) {
        self.context = context
        self.catchUpInterval = catchUpInterval
    }

    /// Notifications arrive a producer's commit at a time.
    public var gathersWakeUps: Bool { true }

    enum SQL {
        /// $3 the worker to lease deliveries to at birth, for $4 seconds, up to $5 of them (their
        /// ids: `leased`, for this daemon's dispatch, ``BirthLeases``); a device whose store at its
        /// provider is full gets a catch-up message at most every $6 seconds; $7 the apps whose
        /// notifications to leave alone (``HeldApps``).
        static let ingestNext = """
            SELECT accepted, rejected, expired, no_devices, superseded, deliveries, leased
            FROM herald.ingest_next($1, $2, $3, make_interval(secs => $4), $5, make_interval(secs => $6), $7)
            """
        static let ingest = """
            SELECT accepted, rejected, expired, no_devices, superseded, deliveries
            FROM herald.ingest($1::bigint[], $2, catch_up_every => make_interval(secs => $3))
            """
        /// The next $1 notifications waiting, without locking them, but those of the apps $2, with
        /// their apps: the fallback's list.
        static let waiting = """
            SELECT n.id, n.app_id FROM herald.notifications n
            WHERE n.id IN (SELECT herald.notifications_waiting($1)) AND n.app_id <> ALL($2::text[])
            ORDER BY n.id
            """
        /// Rejects notification $1, which cannot be ingested ($2: why).
        static let rejectUnprocessable = "SELECT herald.reject_unprocessable($1, $2)"
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        do {
            let started = context.monotonicClock.now
            let reserved = context.births?.reserve(upTo: limit) ?? 0
            let now = context.clock.now()
            let counts = try await ingest(
                SQL.ingestNext,
                [
                    limit, now, context.workerID, context.lease.seconds, reserved,
                    catchUpInterval.seconds, context.heldApps.held(kind: kind, at: now),
                ],
                reserved: reserved, leasedAt: started)
            claimTimer.finished(took: context.monotonicClock.now - started, rows: counts, logger: context.logger)
            return counts
        } catch let error as PostgresError where error.isLockTimeout || (error.kind == .server && !error.isTransient) {
            // One app's rows, or one row, must not block the rest. A lock another session holds
            // (a producer's open transaction on its app's device or delivery) is met by that app's
            // notifications alone: each app's are ingested apart, and an app whose notifications
            // meet the lock is left alone for a while (HeldApps). Within an app whose batch fails
            // otherwise, one at a time, and what still fails is rejected. Not when the failure is
            // transient otherwise (a statement timeout, a deadlock, a shutdown, a read-only server
            // in a failover): no row is at fault, and the batch is tried again whole.
            context.logger.warning(
                "ingesting a batch failed; retrying each app's notifications apart", metadata: ["error": "\(error)"])
            let waiting = try await context.connection.query(
                SQL.waiting, [limit, context.heldApps.held(kind: kind, at: context.clock.now())]
            ).map { (id: try $0.decode(0, as: Int64.self), app: try $0.decode(1, as: String.self)) }
            var apps: [String] = []
            var ids: [String: [Int64]] = [:]
            for row in waiting {
                if ids[row.app] == nil { apps.append(row.app) }
                ids[row.app, default: []].append(row.id)
            }
            for app in apps {
                try await ingestApart(ids[app] ?? [], of: app)
            }
            return waiting.count
        }
    }

    /// Ingests `app`'s notifications `ids` in one statement, else one at a time, rejecting those
    /// that cannot be ingested; leaves the app alone for a while when they meet a lock another
    /// session holds.
    private func ingestApart(_ ids: [Int64], of app: String) async throws {
        let held = context.heldApps
        func leave(after error: PostgresError) {
            let wait = held.leave(app, kind: kind, now: context.clock.now())
            StatementBounds.leftLocked(
                "app \(app)'s notifications", kind: kind, until: "in \(wait)", logger: context.logger)
        }
        do {
            _ = try await ingest(SQL.ingest, [ids, context.clock.now(), catchUpInterval.seconds])
            held.release(app, kind: kind)
            return
        } catch let error as PostgresError where error.isLockTimeout {
            return leave(after: error)
        } catch let error as PostgresError where error.kind == .server && !error.isTransient {
            guard ids.count > 1 else { return try await reject(ids[0], error) }
        }
        for id in ids {
            do {
                _ = try await ingest(SQL.ingest, [[id], context.clock.now(), catchUpInterval.seconds])
            } catch let error as PostgresError where error.isLockTimeout {
                return leave(after: error)
            } catch let error as PostgresError where error.kind == .server && !error.isTransient {
                try await reject(id, error)
            }
        }
        held.release(app, kind: kind)
    }

    private func reject(_ id: Int64, _ error: PostgresError) async throws {
        try await context.connection.query(SQL.rejectUnprocessable, [id, "ingest failed: \(error)"])
        context.logger.error(
            "rejected a notification that cannot be ingested", metadata: ["notification": "\(id)", "error": "\(error)"])
    }

    /// Runs one ingest statement and hands the ids of what it leased at birth (into `reserved`
    /// room, leases asked for at `leasedAt`) to dispatch; returns how many notifications it
    /// ingested.
    private func ingest(
        _ sql: String, _ parameters: [any PostgresEncodable], reserved: Int = 0,
        leasedAt: ContinuousClock.Instant = .now
    ) async throws -> Int {
        let names = ["accepted", "rejected", "expired", "no_devices", "superseded", "deliveries"]
        let counts: [Int]
        var births: [Int64] = []
        do {
            let rows = try await context.connection.query(sql, parameters)
            counts = try names.map { try rows[0].decode($0, as: Int.self) }
            if reserved > 0 { births = try rows[0].decode("leased", as: [Int64]?.self) ?? [] }
        } catch {
            _ = context.births?.hand([], reserved: reserved, leasedAt: leasedAt)  // the room is free again
            throw error
        }
        if let handOff = context.births {
            await BirthLeases.release(handOff.hand(births, reserved: reserved, leasedAt: leasedAt), context: context)
        }
        // Every notification taken ends in one of the first five.
        let ingested = counts.prefix(5).reduce(0, +)
        guard ingested > 0 else { return 0 }
        context.logger.debug(
            "ingested notifications",
            metadata: Dictionary(
                uniqueKeysWithValues: zip(names, counts.map { Logger.MetadataValue.stringConvertible($0) })))
        if counts[1] > 0 {
            context.logger.notice(
                "rejected notifications; see herald.notifications.reason", metadata: ["count": "\(counts[1])"])
        }
        countFinished(kind: kind, ["completed": ingested])
        return ingested
    }
}
