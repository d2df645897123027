import HeraldCore
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

/// Applies delivery reports in batches, with one call to `herald.reconcile` (see
/// `migrations/functions/reconcile.sql`): reported deliveries become `delivered`, and an iOS device
/// whose report shows it missed earlier notifications gets one silent wake-up, at most one per
/// device per quiet period, whatever the number of daemons.
///
/// Reports already applied are skipped, so a batch repeated after a crash changes nothing.
public struct ReconcileWorker: JobHandler {
    public let kind = WorkerKind.reconcile.rawValue
    let context: WorkerContext

    /// When wake-ups are sent: these defaults are the only ones (`herald.reconcile` takes them
    /// at each call).
    public struct Settings: Sendable {
        /// No second wake-up for a device sooner than this after its last one.
        public var quietPeriod: Duration = .seconds(30 * 60)
        /// A delivery sent this recently is not yet missed: its report may still be on the way.
        public var grace: Duration = .seconds(60)

        public init() {}
    }

    public init(context: WorkerContext) { self.context = context }

    /// How long a batch that failed for a reason not its own waits before it is tried again.
    static let transientDelay: Duration = .seconds(1)

    enum SQL {
        /// Reconciles reports $1 at $2, with the wake-up interval $3 and grace $4 in seconds
        /// (`herald.reconcile`, `migrations/functions/reconcile.sql`), over `herald.fetch_window()`.
        static let reconcile = """
            SELECT reports, delivered, wakeups
            FROM herald.reconcile($1::bigint[], $2, make_interval(secs => $3), make_interval(secs => $4))
            """
    }

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        var (ids, outcomes) = jobs.refs(naming: "report")
        guard !ids.isEmpty else { return outcomes }
        do {
            try await apply(ids)
        } catch let error as PostgresError where error.isLockTimeout {
            // A row of one report's device or delivery is locked by another session (a producer's
            // open transaction): each report alone, so that the others are applied now and only
            // those that meet the lock wait.
            context.logger.warning(
                "applying delivery reports met a locked row; applying them one at a time", metadata: ["error": "\(error)"])
            for job in jobs where outcomes[job.id] == nil {
                guard let report = job.ref else { continue }
                do {
                    try await apply([report])
                } catch let error as PostgresError where error.isLockTimeout {
                    StatementBounds.leftLocked(
                        "report \(report)", kind: kind, until: "in \(LockedRows.wait)", logger: context.logger)
                    outcomes[job.id] = .postpone(
                        by: LockedRows.wait, reason: "its rows are locked by another session: \(error)")
                } catch {
                    outcomes[job.id] = Self.failed(error, logger: context.logger)
                }
            }
        } catch {
            let outcome = Self.failed(error, logger: context.logger)
            for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = outcome }
            return outcomes
        }
        for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = .completed }
        return outcomes
    }

    /// Applies reports `ids` in one statement.
    private func apply(_ ids: [Int64]) async throws {
        let settings = context.reconcile
        let counts = try await context.connection.query(
            SQL.reconcile, [ids, context.clock.now(), settings.quietPeriod.seconds, settings.grace.seconds])[0]
        let reports = try counts.decode("reports", as: Int.self)
        let wakeups = try counts.decode("wakeups", as: Int.self)
        context.logger.debug(
            "applied delivery reports", metadata: ["reports": "\(reports)", "wakeups": "\(wakeups)"])
        Counter(label: "herald_reports_applied_total").increment(by: reports)
        Counter(label: "herald_wakeups_total").increment(by: wakeups)
        if wakeups > 0 {
            context.logger.info(
                "scheduled wake-ups for devices that missed notifications", metadata: ["count": "\(wakeups)"])
        }
    }

    /// What becomes of reports whose batch failed with `error`.
    private static func failed(_ error: any Error, logger: Logger) -> JobOutcome {
        if let error = error as? PostgresError, error.isTransient {
            // Not the reports' fault (a report retirement moved to the kept side meanwhile, a
            // deadlock, a failover): tried again soon, without spending an attempt.
            logger.warning(
                "applying delivery reports failed for now; the batch will be tried again",
                metadata: ["error": "\(error)"])
            return .postpone(by: transientDelay, reason: "reconcile failed for now: \(error)")
        }
        logger.error("applying delivery reports failed; the batch will be retried", metadata: ["error": "\(error)"])
        return .retry(error: "reconcile failed: \(error)")
    }
}
