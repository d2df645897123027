import Foundation
import HeraldCore
import HeraldPostgres

/// What `herald status` reports: the queues by kind (`herald.queue_depth`), and what an operator
/// should look at. It reads operator views only, so it names no provider: each provider's rows
/// come through them.
public struct StatusReport: Sendable, Codable, Equatable {
    public struct Kind: Sendable, Codable, Equatable {
        public var kind: String
        /// Due now and waiting for a worker.
        public var ready: Int
        /// Waiting for a later `run_at` (scheduled or backing off).
        public var scheduled: Int
        public var running: Int
        /// Running, but past their lease: their process probably died; rescue will return them.
        public var leaseExpired: Int
        public var dead: Int
        /// Seconds since the oldest ready job became due; nil when none is ready.
        public var oldestReadySeconds: Double?
    }

    public var kinds: [Kind]
    /// A configuration of an app that fails now, or a certificate about to expire (a row of
    /// `herald.app_problems`).
    public struct AppProblem: Sendable, Codable, Equatable {
        public var app: String
        /// A configuration scope (`herald.config_scopes`), or a warning's own name such as
        /// `apns_certificate`.
        public var scope: String
        /// What waits because of it: "every delivery through FCM", "deliveries to browsers", …
        public var waiting: String
        public var problem: String
    }

    public var appProblems: [AppProblem] = []

    /// A route whose window of sends in flight was full in the last two minutes, so that its
    /// other deliveries waited (rows of `herald.route_saturation`, summed over workers).
    public struct SaturatedRoute: Sendable, Codable, Equatable {
        public var app: String
        /// A route of `herald.routes`.
        public var route: String
        /// The push service's origin, for `web`.
        public var origin: String?
        public var inFlight: Int
        public var postponed: Int
        public var since: Date
    }

    public var saturatedRoutes: [SaturatedRoute] = []

    /// An account a provider refused for its quota: every daemon waits until then (rows of
    /// `herald.quota_pauses`).
    public struct QuotaPause: Sendable, Codable, Equatable {
        /// "FCM project shop-prod".
        public var account: String
        public var until: Date
        /// The provider's words, after its name.
        public var reason: String
        /// What an operator can do if it recurs.
        public var advice: String
    }

    public var quotaPauses: [QuotaPause] = []

    /// The server `herald status` reached, whether it takes writes, and the Herald connections on
    /// it by client address. A daemon missing here after a failover is connected elsewhere, or
    /// nowhere: its `/healthz` says which.
    public struct Database: Sendable, Codable, Equatable {
        public var server: String
        /// False on a standby, or a primary made read-only in its configuration (not merely for
        /// the role `herald status` runs as).
        public var writable: Bool
        public struct Clients: Sendable, Codable, Equatable {
            /// The client's address, `local` for a Unix socket, `hidden` when the role may not see it.
            public var client: String
            public var connections: Int
        }
        public var clients: [Clients]
    }

    public var database: Database?

    /// The generations `herald.notifications` and `herald.deliveries` are partitioned by
    /// (`herald.generations`), and the rows kept out of them.
    public struct Partitions: Sendable, Codable, Equatable {
        /// Generations with partitions, the open one and those made ahead included.
        public var generations: Int
        public var open: Int
        public var openedAt: Date
        /// Notifications and deliveries that outlived their generation (scheduled, backing off,
        /// dead, not yet ingested).
        public var keptNotifications: Int
        public var keptDeliveries: Int
        /// Generations made ahead of the one in use (two, normally); none left means no retention
        /// pass ran for a long time.
        public var ahead: Int
    }

    public var partitions: Partitions?

    /// A session that holds up Herald's workers (`herald.lock_holders`): its transaction has
    /// been open a while, holding every row it wrote, or a Herald session waits for it now.
    public struct LockHolder: Sendable, Codable, Equatable {
        public var pid: Int
        /// Nil when the role reading the status may not see other roles' sessions.
        public var role: String?
        public var applicationName: String?
        public var client: String?
        /// `idle in transaction`, `active`, …
        public var state: String?
        public var transactionSince: Date?
        public var stateSince: Date?
        /// How many of Herald's sessions wait for it now.
        public var heraldSessionsWaiting: Int
        /// The apps its role may act for (`herald.producer_apps`): the work it can hold up.
        public var actsFor: [String]
    }

    public var lockHolders: [LockHolder] = []

    /// How long a transaction may stay open before `herald status` names it among its problems
    /// (a session a Herald session waits for is named at once).
    public static let longTransaction = 60.0
    /// Apps every producer may act for: granted to `herald_producer` itself, as migration 015
    /// left the apps that existed before it.
    public var openToEveryProducer: [String] = []

    public static func load(_ connection: PostgresConnection) async throws -> StatusReport {
        var status = try await loadQueues(connection)
        status.appProblems = try await connection.query(SQL.appProblems).map { row in
            AppProblem(
                app: try row.decode("app_id"), scope: try row.decode("scope"), waiting: try row.decode("waiting"),
                problem: try row.decode("config_error")
            )
        }
        status.openToEveryProducer = try await connection.query(SQL.openToEveryProducer).map { try $0.decode(0) }
        let clients = try await connection.query(SQL.heraldClients).map { row in
            Database.Clients(client: try row.decode("client"), connections: try row.decode("connections"))
        }
        let writable = try await connection.query(SQL.serverWritable)[0].decode(0, as: Bool.self)
        status.database = connection.link?.snapshot.server.map {
            Database(server: $0, writable: writable, clients: clients)
        }
        status.saturatedRoutes = try await connection.query(SQL.saturatedRoutes).map { row in
            let origin: String = try row.decode("origin")
            return SaturatedRoute(
                app: try row.decode("app_id"), route: try row.decode("route"), origin: origin.isEmpty ? nil : origin,
                inFlight: try row.decode("in_flight"), postponed: try row.decode("postponed"),
                since: try row.decode("since"))
        }
        status.quotaPauses = try await connection.query(SQL.quotaPauses).map { row in
            QuotaPause(
                account: try row.decode("account"), until: try row.decode("paused_until"),
                reason: try row.decode("reason"), advice: try row.decode("advice"))
        }
        status.partitions = try await connection.query(SQL.partitions).first.map { row in
            Partitions(
                generations: try row.decode("generations"), open: try row.decode("open"),
                openedAt: try row.decode("opened_at"), keptNotifications: try row.decode("kept_notifications"),
                keptDeliveries: try row.decode("kept_deliveries"), ahead: try row.decode("ahead")
            )
        }
        status.lockHolders = try await connection.query(SQL.lockHolders).map { row in
            LockHolder(
                pid: try row.decode("pid"), role: try row.decode("role"),
                applicationName: try row.decode("application_name"), client: try row.decode("client"),
                state: try row.decode("state"), transactionSince: try row.decode("transaction_since"),
                stateSince: try row.decode("state_since"),
                heraldSessionsWaiting: try row.decode("herald_sessions_waiting"),
                actsFor: try row.decode("acts_for"))
        }
        return status
    }

    /// The queues alone (`herald.queue_depth`), as `herald status` and the metrics read them.
    public static func loadQueues(_ connection: PostgresConnection) async throws -> StatusReport {
        let result = try await connection.query(SQL.queueDepth)
        return StatusReport(
            kinds: try result.map { row in
                Kind(
                    kind: try row.decode("kind"), ready: try row.decode("ready"),
                    scheduled: try row.decode("scheduled"),
                    running: try row.decode("running"), leaseExpired: try row.decode("lease_expired"),
                    dead: try row.decode("dead"),
                    oldestReadySeconds: try row.decode("oldest_ready_seconds", as: Double?.self))
            })
    }

    /// How long a due notification or delivery may wait before ingest or dispatch counts as
    /// falling behind: they take work within moments of its commit, so a minute is a stall.
    public static let fallingBehind = 60.0

    /// Things an operator should look at; empty when all is well.
    public func problems(maximumReadyAge: Double) -> [String] {
        var problems = appProblems.map { "app \($0.app), \($0.scope): \($0.problem) (waiting: \($0.waiting))" }
        if let database, !database.writable {
            problems.append(
                "database \(database.server) is read-only (a standby, or default_transaction_read_only is on):"
                    + " the daemons cannot work there; point HERALD_DATABASE_URL at the primary")
        }
        for app in openToEveryProducer {
            problems.append(
                "app \(app): every producer may act for it (granted to herald_producer): grant it to its producers' roles"
                    + " in herald.producer_apps, then delete that row")
        }
        for saturated in saturatedRoutes {
            let route = saturated.origin.map { "\(saturated.route) \($0)" } ?? saturated.route
            problems.append(
                "app \(saturated.app), route \(route): slow, its window is full (\(saturated.inFlight) in flight,"
                    + " \(saturated.postponed) postponed since \(saturated.since)); its other deliveries wait, the"
                    + " other routes go on")
        }
        for paused in quotaPauses {
            problems.append(
                "\(paused.account): over its quota, every daemon waits until \(paused.until)"
                    + " (\(paused.reason)); \(paused.advice)")
        }
        for holder in lockHolders {
            let open = holder.transactionSince.map { Date().timeIntervalSince($0) } ?? 0
            guard holder.heraldSessionsWaiting > 0 || open > Self.longTransaction else { continue }
            let who =
                "session pid \(holder.pid) (role \(holder.role ?? "hidden"), application"
                + " '\(holder.applicationName ?? "")', \(holder.state ?? "state hidden")"
                + (holder.stateSince.map { " since \($0)" } ?? "") + ")"
            let waiting =
                holder.heraldSessionsWaiting > 0
                ? ", and \(holder.heraldSessionsWaiting) of Herald's sessions wait for it" : ""
            let apps = holder.actsFor.isEmpty ? "" : "; it acts for \(holder.actsFor.joined(separator: ", "))"
            problems.append(
                "\(who) has held a transaction open since \(holder.transactionSince.map { "\($0)" } ?? "?")"
                    + waiting + apps + ": the rows it wrote wait until it ends (the workers go on without them);"
                    + " end it with SELECT pg_terminate_backend(\(holder.pid)) or fix that client"
                    + " (docs/operators.md#sessions-that-hold-up-the-workers)")
        }
        if let partitions, partitions.ahead == 0 {
            problems.append(
                "no generation of notifications and deliveries is made ahead of g\(partitions.open): no daemon has run"
                    + " retention for a long time")
        }
        for kind in kinds {
            if kind.dead > 0 {
                problems.append(
                    kind.kind == WorkerKind.dispatch.rawValue
                        ? "\(kind.dead) dead deliveries (herald.dead_jobs; the path of one:"
                            + " SELECT * FROM herald.notification_path(app, notification => id))"
                        : "\(kind.dead) dead \(kind.kind) job(s)")
            }
            if let age = kind.oldestReadySeconds, age > maximumReadyAge {
                problems.append("\(kind.kind) backlog: oldest ready job waited \(Int(age))s")
            } else if let age = kind.oldestReadySeconds, age > Self.fallingBehind,
                [WorkerKind.ingest.rawValue, WorkerKind.dispatch.rawValue].contains(kind.kind)
            {
                problems.append(
                    "\(kind.kind) is falling behind: its oldest due item waited \(Int(age))s, where a notification"
                        + " leaves within moments; a running daemon logs each slow \(kind.kind) claim or record")
            }
            if kind.leaseExpired > 0 {
                problems.append("\(kind.leaseExpired) \(kind.kind) job(s) past their lease")
            }
        }
        return problems
    }

    /// A fixed-width table for a terminal.
    public func table() -> String {
        let header = ["KIND", "READY", "SCHEDULED", "RUNNING", "LEASE EXPIRED", "DEAD", "OLDEST READY"]
        var rows = [header]
        for kind in kinds {
            rows.append([
                kind.kind, "\(kind.ready)", "\(kind.scheduled)", "\(kind.running)", "\(kind.leaseExpired)",
                "\(kind.dead)", kind.oldestReadySeconds.map { String(format: "%.1fs", $0) } ?? "-",
            ])
        }
        if kinds.isEmpty { rows.append(["(no jobs)", "", "", "", "", "", ""]) }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        var table = rows.map { row in
            row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
        if let database {
            let clients = database.clients.map { "\($0.client) (\($0.connections))" }
            table +=
                "\n\ndatabase: \(database.server), \(database.writable ? "takes writes" : "read-only");"
                + " Herald connections here: "
                + (clients.isEmpty ? "none" : clients.joined(separator: ", "))
        }
        if let partitions {
            table +=
                "\npartitions: \(partitions.generations) generations, g\(partitions.open) open since"
                + " \(partitions.openedAt); kept out of them: \(partitions.keptNotifications) notifications,"
                + " \(partitions.keptDeliveries) deliveries"
        }
        return table
    }

    enum SQL {
        static let lockHolders = """
            SELECT pid, role, application_name, client, state, transaction_since, state_since, herald_sessions_waiting,
                   acts_for
            FROM herald.lock_holders ORDER BY transaction_since, pid
            """
        static let appProblems =
            "SELECT app_id, scope, waiting, config_error FROM herald.app_problems ORDER BY app_id, scope"
        static let openToEveryProducer = """
            SELECT app_id FROM herald.producer_apps WHERE producer = 'herald_producer'::regrole ORDER BY app_id
            """
        static let saturatedRoutes = """
            SELECT app_id, route, origin, sum(in_flight)::int AS in_flight, sum(postponed)::int8 AS postponed,
                   min(since) AS since
            FROM herald.route_saturation WHERE seen_at > now() - interval '2 minutes'
            GROUP BY app_id, route, origin ORDER BY app_id, route, origin
            """
        static let partitions = """
            SELECT count(*) FILTER (WHERE generation IS NOT NULL)::int AS generations,
                   max(generation) FILTER (WHERE opened_at IS NOT NULL) AS open, max(opened_at) AS opened_at,
                   sum(notifications) FILTER (WHERE part = 'kept')::int AS kept_notifications,
                   sum(deliveries) FILTER (WHERE part = 'kept')::int AS kept_deliveries,
                   count(*) FILTER (WHERE generation IS NOT NULL AND opened_at IS NULL)::int AS ahead
            FROM herald.partitions
            """
        static let quotaPauses =
            "SELECT account, paused_until, reason, advice FROM herald.quota_pauses ORDER BY account"
        /// Every session named `herald…` but this one: daemons set `application_name` to `herald`
        /// unless the connection string names them.
        static let heraldClients = """
            SELECT coalesce(host(client_addr), CASE WHEN client_port = -1 THEN 'local' ELSE 'hidden' END) AS client,
                   count(*)::int AS connections
            FROM pg_stat_activity
            WHERE application_name LIKE 'herald%' AND pid <> pg_backend_pid()
            GROUP BY 1 ORDER BY 1
            """
        /// Whether the server takes writes: not in recovery, and not read-only by its own
        /// configuration (a read-only operator role is no read-only server).
        static let serverWritable = """
            SELECT NOT (pg_is_in_recovery() OR EXISTS (
                SELECT 1 FROM pg_settings WHERE name = 'default_transaction_read_only' AND setting = 'on'
                                            AND source IN ('configuration file', 'command line')))
            """
        static let queueDepth = """
            SELECT kind, ready, scheduled, running, lease_expired, dead,
                   extract(epoch FROM oldest_ready_age)::float8 AS oldest_ready_seconds
            FROM herald.queue_depth ORDER BY kind
            """
    }
}
