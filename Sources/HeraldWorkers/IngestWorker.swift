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
/// When the daemon also dispatches, some of the deliveries are created leased to it, read in
/// the same statement as a claim reads them, and handed straight to its dispatch
/// (``BirthLeases``), as many as there is room for.
public struct IngestWorker: BatchWorker {
    public let kind = WorkerKind.ingest.rawValue
    let context: WorkerContext
    private let claimTimer = StatementTimer(kind: WorkerKind.ingest.rawValue, .claim)

    public init(context: WorkerContext) { self.context = context }

    /// Notifications arrive a producer's commit at a time.
    public var gathersWakeUps: Bool { true }

    enum SQL {
        /// $3 the worker to lease deliveries to at birth, for $4 seconds, up to $5 of them; a device
        /// whose store at its provider is full gets a catch-up message at most every $6 seconds;
        /// $7 the notifications to leave alone (``LockedRows``).
        static let ingestNext = """
            SELECT accepted, rejected, expired, no_devices, superseded, deliveries
            FROM herald.ingest_next($1, $2, $3, make_interval(secs => $4), $5, make_interval(secs => $6), $7)
            """
        /// As ``ingestNext``, and the deliveries leased at birth read as the claim reads them
        /// (`herald.claim_sends`' `held`, `migrations/functions/dispatch.sql`), beside the counts:
        /// one row each, or a row of the counts alone when none was leased (not the leased ids,
        /// which every row would repeat). The claim sees what ingest made: it is a volatile
        /// function, so each of its statements takes a new snapshot.
        static let ingestNextAndRead = """
            SELECT i.accepted, i.rejected, i.expired, i.no_devices, i.superseded, i.deliveries, s.*
            FROM herald.ingest_next($1, $2, $3, make_interval(secs => $4), $5, make_interval(secs => $6), $7) i
            LEFT JOIN LATERAL herald.claim_sends($2, 0, $3, make_interval(secs => $4), i.leased) s ON true
            """
        static let ingest = """
            SELECT accepted, rejected, expired, no_devices, superseded, deliveries
            FROM herald.ingest($1::bigint[], $2, catch_up_every => make_interval(secs => $3))
            """
        /// The next notifications waiting, without locking them: the one-at-a-time fallback's list.
        static let waiting = "SELECT herald.notifications_waiting($1)"
        /// Rejects notification $1, which cannot be ingested ($2: why).
        static let rejectUnprocessable = "SELECT herald.reject_unprocessable($1, $2)"
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let locked = context.lockedRows
        do {
            let started = ContinuousClock.now
            let reserved = context.births?.reserve(upTo: limit) ?? 0
            let now = context.clock.now()
            let counts = try await ingest(
                reserved > 0 ? SQL.ingestNextAndRead : SQL.ingestNext,
                [
                    limit, now, context.workerID, context.lease.seconds, reserved,
                    context.reconcile.quietPeriod.seconds, locked.left(at: now),
                ],
                reserved: reserved, leasedAt: started)
            claimTimer.finished(since: started, rows: counts, logger: context.logger)
            return counts
        } catch let error as PostgresError where error.isLockTimeout || (error.kind == .server && !error.isTransient) {
            // One row must not block the rest: go one by one. A notification that fails alone is
            // rejected; one whose rows another session holds locked (a producer's open
            // transaction) is left for a while (LockedRows) and the others go on. Not when the
            // failure is transient otherwise (a statement timeout, a deadlock, a shutdown, a
            // read-only server in a failover): no row is at fault, and the batch is tried again
            // whole.
            context.logger.warning(
                "ingesting a batch failed; retrying its notifications one at a time", metadata: ["error": "\(error)"])
            let left = Set(locked.left(at: context.clock.now()))
            let ids = try await context.connection.query(SQL.waiting, [limit + left.count]).map {
                try $0.decode(0, as: Int64.self)
            }.filter { !left.contains($0) }.prefix(limit)
            for id in ids {
                do {
                    _ = try await ingest(
                        SQL.ingest, [[id], context.clock.now(), context.reconcile.quietPeriod.seconds])
                } catch let error as PostgresError where error.isLockTimeout {
                    locked.leave(id, now: context.clock.now())
                    StatementBounds.leftLocked(
                        "notification \(id)", kind: kind, until: "in \(LockedRows.wait)", logger: context.logger)
                } catch let error as PostgresError where error.kind == .server && !error.isTransient {
                    try await context.connection.query(SQL.rejectUnprocessable, [id, "ingest failed: \(error)"])
                    context.logger.error(
                        "rejected a notification that cannot be ingested",
                        metadata: ["notification": "\(id)", "error": "\(error)"])
                }
            }
            return ids.count
        }
    }

    /// Runs one ingest statement and hands what it leased at birth (into `reserved` room, leases
    /// asked for at `leasedAt`), with the rows it read of them, to dispatch; returns how many
    /// notifications it ingested.
    private func ingest(
        _ sql: String, _ parameters: [any PostgresEncodable], reserved: Int = 0,
        leasedAt: ContinuousClock.Instant = .now
    ) async throws -> Int {
        let names = ["accepted", "rejected", "expired", "no_devices", "superseded", "deliveries"]
        let counts: [Int]
        var births: [BirthLeases.Birth] = []
        do {
            let rows = try await context.connection.query(sql, parameters)
            counts = try names.map { try rows[0].decode($0, as: Int.self) }
            if reserved > 0 {
                births = try rows.compactMap { row in
                    try row.decode("delivery_id", as: Int64?.self).map { BirthLeases.Birth(id: $0, row: row) }
                }
            }
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
