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

    /// When wake-ups are sent (`HERALD_WAKEUP_INTERVAL`, `HERALD_WAKEUP_GRACE` through the
    /// daemon's `WorkerSettings`; `herald.reconcile` takes them at each call).
    public struct Settings: Sendable {
        /// No second wake-up for a device sooner than this after its last one.
        public var quietPeriod: Duration = .seconds(30 * 60)
        /// A delivery sent this recently is not yet missed: its report may still be on the way.
        public var grace: Duration = .seconds(60)

        public init() {}
    }

    let settings: Settings

    public init(context: WorkerContext, settings: Settings = .init()) {
        self.context = context
        self.settings = settings
    }

    /// How long a batch that failed for a reason not its own waits before it is tried again.
    static let transientDelay: Duration = .seconds(1)

    enum SQL {
        /// The app of each of the reports $1 (its device's), in id order.
        static let apps = """
            SELECT r.id, coalesce(dev.app_id, '') FROM herald.delivery_reports r
            LEFT JOIN herald.devices dev ON dev.id = r.device_id
            WHERE r.id = ANY($1::bigint[]) ORDER BY r.id
            """
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
        let held = context.heldApps.held(kind: kind, at: context.clock.now())
        if !held.isEmpty {
            // The reports of apps that met a lock lately wait their turn without being tried.
            do {
                let waiting = Set(
                    try await context.connection.query(SQL.apps, [ids]).filter {
                        held.contains(try $0.decode(1, as: String.self))
                    }.map { try $0.decode(0, as: Int64.self) })
                for job in jobs where job.ref.map(waiting.contains) == true {
                    outcomes[job.id] = .postpone(
                        by: HeldApps.firstWait, reason: "its app's rows are locked by another session")
                }
                ids.removeAll(where: waiting.contains)
            } catch {
                let outcome = Self.failed(error, logger: context.logger)
                for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = outcome }
                return outcomes
            }
            guard !ids.isEmpty else { return outcomes }
        }
        do {
            try await apply(ids)
        } catch let error as PostgresError where error.isLockTimeout {
            // A row of one app's device or delivery is locked by another session (a producer's
            // open transaction): each app's reports apart, so that the others are applied now and
            // only that app's wait, for longer each time it meets the lock again (HeldApps).
            context.logger.warning(
                "applying delivery reports met a locked row; applying each app's apart", metadata: ["error": "\(error)"]
            )
            do {
                var apps: [String] = []
                var reports: [String: [Int64]] = [:]
                for row in try await context.connection.query(SQL.apps, [ids]) {
                    let app = try row.decode(1, as: String.self)
                    if reports[app] == nil { apps.append(app) }
                    reports[app, default: []].append(try row.decode(0, as: Int64.self))
                }
                for app in apps {
                    let ids = Set(reports[app] ?? [])
                    let appJobs = jobs.filter { $0.ref.map(ids.contains) == true && outcomes[$0.id] == nil }
                    do {
                        try await apply(Array(ids))
                        context.heldApps.release(app, kind: kind)
                    } catch let error as PostgresError where error.isLockTimeout {
                        let wait = context.heldApps.leave(app, kind: kind, now: context.clock.now())
                        StatementBounds.leftLocked(
                            "app \(app)'s reports", kind: kind, until: "in \(wait)", logger: context.logger)
                        for job in appJobs {
                            outcomes[job.id] = .postpone(
                                by: wait, reason: "its rows are locked by another session: \(error)")
                        }
                    } catch {
                        let outcome = Self.failed(error, logger: context.logger)
                        for job in appJobs { outcomes[job.id] = outcome }
                    }
                }
            } catch {
                let outcome = Self.failed(error, logger: context.logger)
                for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = outcome }
                return outcomes
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
