import HeraldPostgres
import Logging

/// One numbered SQL file from `migrations/`: a step of the schema's history, applied once.
public struct Migration: Sendable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// One file from `migrations/functions/`: the current text of some functions and views,
/// written as `CREATE OR REPLACE` with their grants, applied again whenever it changes.
public struct FunctionFile: Sendable {
    /// The file's name, `dispatch.sql`.
    public var name: String
    public var sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }
}

/// `migrations/baseline/`: the schema the numbered migrations up to `version` add up to, for a
/// new database (`migrations/README.md`, "Two paths to one schema"). `tables` applies before
/// the function files, `afterFunctions` (what calls a function or names a view) after them.
public struct Baseline: Sendable {
    public var version: Int
    public var tables: String
    public var afterFunctions: String

    public init(version: Int, tables: String, afterFunctions: String) {
        self.version = version
        self.tables = tables
        self.afterFunctions = afterFunctions
    }
}

/// What one run of the migrator applied.
public struct MigrationRun: Sendable, Equatable {
    /// The numbered migrations it applied, in order.
    public var versions: [Int] = []
    /// The function files it applied (new or changed), in order.
    public var functionFiles: [String] = []
    /// Whether it made a new database's schema from the baseline (then `versions` are the
    /// migrations the baseline stands for, recorded as applied).
    public var fromBaseline = false

    public var isEmpty: Bool { versions.isEmpty && functionFiles.isEmpty }

    public init(versions: [Int] = [], functionFiles: [String] = [], fromBaseline: Bool = false) {
        self.versions = versions
        self.functionFiles = functionFiles
        self.fromBaseline = fromBaseline
    }
}

/// Moves a database to the schema this binary carries. A new database (no migration recorded)
/// starts from the baseline when it stands for every numbered migration carried: in one
/// transaction, its tables, the function files and what waits for them, with each migration
/// recorded as applied. Any other database moves through the numbered migrations it has not
/// applied, in order, each in its own transaction, recorded in `herald.schema_migrations`
/// (created by migration 0); then, in one transaction, every function file whose text differs
/// from the one last applied (or that was never applied), in name order, recorded with its md5
/// in `herald.schema_functions` (migration 16).
///
/// A session-level advisory lock serializes migrators, so two hosts that migrate at once
/// are safe: the second waits, then finds nothing left to do. Running it again is a no-op.
/// Any session can take that key, so the wait is bounded (``lockWait``): past it, the run fails
/// with a message naming the session that holds the lock.
/// On a database that has numbered migrations this binary does not carry (a newer herald
/// migrated it), the function files are left alone: they would put older text back.
public struct Migrator: Sendable {
    /// The advisory lock key (the bytes of "herald" read as a number).
    static let lockKey: Int64 = 0x6865_7261_6c64

    public var migrations: [Migration]
    public var functionFiles: [FunctionFile]
    public var baseline: Baseline?
    /// How long a run waits for the migration lock before it fails, naming its holder.
    public var lockWait: Duration = Self.defaultLockWait
    /// Long enough for another host's migration to finish (one that rewrites a large table
    /// takes longer, and the run says what holds it).
    public static let defaultLockWait: Duration = .seconds(60)
    let logger: Logger

    /// `functionFiles: []` stops at the numbered migrations given (for tests that build a
    /// database as an older herald left it: the function files hold the newest text), and
    /// `baseline: nil` makes a new database through the numbered migrations too.
    public init(
        migrations: [Migration] = Migration.embedded, functionFiles: [FunctionFile] = FunctionFile.embedded,
        baseline: Baseline? = Baseline.embedded, logger: Logger = Logger(label: "herald.migrate")
    ) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.functionFiles = functionFiles.sorted { $0.name < $1.name }
        self.baseline = baseline
        self.logger = logger
    }

    /// The baseline, when it stands for exactly the numbered migrations carried and the function
    /// files are applied too.
    var usableBaseline: Baseline? {
        guard let baseline, baseline.version == migrations.last?.version, !functionFiles.isEmpty else { return nil }
        return baseline
    }

    /// Applies what is missing or changed and says what it applied.
    @discardableResult
    public func migrate(_ connection: PostgresConnection) async throws -> MigrationRun {
        let migrations = self.migrations
        let functionFiles = self.functionFiles
        let logger = self.logger
        let usableBaseline = self.usableBaseline
        let lockWait = self.lockWait
        return try await connection.withSession { session in
            try Self.lock(session, waiting: lockWait, logger: logger)
            defer { _ = try? session.query(SQL.unlock, [Self.lockKey]) }
            // Migration 0 creates the table the others are recorded in; it changes nothing
            // once the table exists, so it runs first every time.
            if let bootstrap = migrations.first(where: { $0.version == 0 }) { try session.execute(bootstrap.sql) }
            var applied: [Int: String] = [:]
            for row in try session.query(SQL.applied) {
                applied[try row.decode(0, as: Int.self)] = try row.decode(1, as: String.self)
            }
            if applied.isEmpty, let baseline = usableBaseline {
                let started = ContinuousClock.now
                try session.transaction { session in
                    // As a restore of pg_dump's does: a function may read a column that
                    // after_functions.sql adds (a generated column that calls a function), so
                    // bodies are not checked here; the tests check the same text against the
                    // same schema made through the numbered migrations.
                    try session.execute("SET LOCAL check_function_bodies = off")
                    try session.execute(baseline.tables)
                    for file in functionFiles {
                        try session.execute(file.sql)
                        try session.query(SQL.recordFunctionFile, [file.name, file.sql])
                    }
                    try session.execute(baseline.afterFunctions)
                    for migration in migrations {
                        try session.query(SQL.record, [migration.version, migration.name, migration.sql])
                    }
                }
                let took = (ContinuousClock.now - started).formatted(.units(allowed: [.seconds, .milliseconds]))
                logger.info(
                    "made the schema from migrations/baseline (migrations up to \(baseline.version)) and the function files in \(took), one transaction"
                )
                return MigrationRun(
                    versions: migrations.map(\.version), functionFiles: functionFiles.map(\.name), fromBaseline: true)
            }
            var run = MigrationRun()
            for migration in migrations {
                if let checksum = applied[migration.version] {
                    let current = try session.query(SQL.checksum, [migration.sql])[0].decode(0, as: String.self)
                    if current != checksum {
                        logger.warning(
                            "migration \(migration.name) changed after it was applied; the database keeps the old version"
                        )
                    }
                    continue
                }
                let started = ContinuousClock.now
                try session.transaction { session in
                    try session.execute(migration.sql)
                    try session.query(SQL.record, [migration.version, migration.name, migration.sql])
                }
                // Its locks lasted as long: what producers and daemons waited for, on a large table.
                let took = (ContinuousClock.now - started).formatted(.units(allowed: [.seconds, .milliseconds]))
                logger.info("applied migration \(migration.name) in \(took), one transaction")
                run.versions.append(migration.version)
            }
            guard !functionFiles.isEmpty else { return run }
            let unknown = Set(applied.keys).subtracting(migrations.map(\.version)).sorted()
            if !unknown.isEmpty {
                logger.warning(
                    "the database has migrations this herald does not carry (\(unknown.map(String.init).joined(separator: ", "))): a newer herald migrated it, so its function files are left as they are"
                )
                return run
            }
            run.functionFiles = try session.transaction { session in
                let changed = try Self.changed(functionFiles, session)
                for file in changed {
                    try session.execute(file.sql)
                    try session.query(SQL.recordFunctionFile, [file.name, file.sql])
                }
                return changed.map(\.name)
            }
            for name in run.functionFiles { logger.info("applied function file \(name)") }
            return run
        }
    }

    /// The function files whose text differs from the one recorded as applied, or that were
    /// never applied.
    static func changed(_ files: [FunctionFile], _ session: PostgresSession) throws -> [FunctionFile] {
        guard try session.query(SQL.hasFunctionTable)[0].decode(0, as: Bool.self) else { return files }
        var recorded: [String: String] = [:]
        for row in try session.query(SQL.appliedFunctionFiles) {
            recorded[try row.decode(0, as: String.self)] = try row.decode(1, as: String.self)
        }
        return try files.filter { file in
            try recorded[file.name] != session.query(SQL.checksum, [file.sql])[0].decode(0, as: String.self)
        }
    }

    /// The migrations this binary carries that the database has not applied (all of them on
    /// a database never migrated).
    public func pending(_ connection: PostgresConnection) async throws -> [Migration] {
        guard try await connection.query(SQL.hasTable)[0].decode(0, as: Bool.self) else { return migrations }
        let known = try await connection.query(SQL.versions)[0].decode(0, as: [Int].self)
        return migrations.filter { !known.contains($0.version) }
    }

    /// The function files `migrate` would apply: new or changed since last applied. None on a
    /// database a newer herald migrated (see ``migrate(_:)``).
    public func pendingFunctionFiles(_ connection: PostgresConnection) async throws -> [FunctionFile] {
        let migrations = self.migrations
        let functionFiles = self.functionFiles
        return try await connection.withSession { session in
            if try session.query(SQL.hasTable)[0].decode(0, as: Bool.self) {
                let known = try session.query(SQL.versions)[0].decode(0, as: [Int].self)
                if !Set(known).isSubset(of: migrations.map(\.version)) { return [] }
            }
            return try Self.changed(functionFiles, session)
        }
    }

    /// Refuses a binary older than the database's schema serves: a newer release migrated it and
    /// serves only daemons that carry its `herald.oldest_daemon_served()` (the support window of a
    /// rolling upgrade, `migrations/functions/schema.sql`). A database without that function was
    /// migrated by no newer release than this one.
    public func checkServed(_ connection: PostgresConnection) async throws {
        guard let newest = migrations.last?.version,
            try await connection.query(SQL.servesDaemonsByMigration)[0].decode(0, as: Bool.self)
        else { return }
        let oldest = try await connection.query(SQL.oldestDaemonServed)[0].decode(0, as: Int.self)
        guard newest < oldest else { return }
        throw DaemonTooOld(carried: newest, servedFrom: oldest)
    }

    /// Takes the migration lock, waiting at most `wait`; while another session holds it, says
    /// which, and fails naming it when the wait ends.
    static func lock(_ session: PostgresSession, waiting wait: Duration, logger: Logger) throws {
        if try session.query(SQL.tryLock, [Self.lockKey])[0].decode(0, as: Bool.self) { return }
        let before = try holder(session)
        logger.warning(
            "waiting up to \(wait) for the migration lock, held by \(before ?? "a session that just ended")")
        let milliseconds = max(1, wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
        try session.execute("SET lock_timeout = \(milliseconds)")
        defer { _ = try? session.execute("RESET lock_timeout") }
        do {
            try session.query(SQL.lock, [Self.lockKey])
        } catch let error as PostgresError where error.sqlState == "55P03" {
            throw MigrationLockTimeout(
                waited: wait, holder: try holder(session) ?? before ?? "a session that has ended since")
        }
    }

    /// The session holding the migration lock as PostgreSQL knows it, in words.
    static func holder(_ session: PostgresSession) throws -> String? {
        try session.query(SQL.holder, [Self.lockKey]).first?.decode(0, as: String.self)
    }

    enum SQL {
        static let lock = "SELECT pg_advisory_lock($1)"
        static let tryLock = "SELECT pg_try_advisory_lock($1)"
        /// An advisory lock is this database's; a bigint key is held as its high and low 32 bits,
        /// objsubid 1.
        static let holder = """
            SELECT format('pid %s (role %s, application %s, %s since %s)', a.pid, a.usename,
                          quote_literal(a.application_name), a.state, a.state_change)
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
              AND l.classid::bigint = $1::bigint >> 32 AND l.objid::bigint = $1::bigint & 4294967295
            LIMIT 1
            """
        static let unlock = "SELECT pg_advisory_unlock($1)"
        static let applied = "SELECT version, checksum FROM herald.schema_migrations"
        static let checksum = "SELECT md5($1)"
        static let record = "INSERT INTO herald.schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))"
        static let hasTable = "SELECT to_regclass('herald.schema_migrations') IS NOT NULL"
        static let versions = "SELECT coalesce(array_agg(version), '{}') FROM herald.schema_migrations"
        static let servesDaemonsByMigration = "SELECT to_regprocedure('herald.oldest_daemon_served()') IS NOT NULL"
        static let oldestDaemonServed = "SELECT herald.oldest_daemon_served()"
        static let hasFunctionTable = "SELECT to_regclass('herald.schema_functions') IS NOT NULL"
        static let appliedFunctionFiles = "SELECT file, checksum FROM herald.schema_functions"
        /// $1 the file's name, $2 its text.
        static let recordFunctionFile = """
            INSERT INTO herald.schema_functions (file, checksum) VALUES ($1, md5($2))
            ON CONFLICT (file) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
            """
    }
}

/// A migration run gave up waiting for the migration lock.
public struct MigrationLockTimeout: Error, CustomStringConvertible {
    public var waited: Duration
    /// The session holding the lock, as PostgreSQL knows it.
    public var holder: String

    public var description: String {
        "herald migrate waited \(waited) for the migration lock (advisory lock \(Migrator.lockKey)), held by"
            + " \(holder): another herald migrate, or a session that took the same key. Let it finish, or end it"
            + " (pg_terminate_backend), and migrate again"
    }
}

/// The database's schema does not serve this binary's daemon: a newer release migrated it past
/// the support window (``Migrator/checkServed(_:)``).
public struct DaemonTooOld: Error, CustomStringConvertible {
    /// The newest numbered migration this binary carries.
    public var carried: Int
    /// The newest numbered migration the oldest daemon the schema serves carries.
    public var servedFrom: Int

    public var description: String {
        "this herald carries migrations up to \(carried), but a newer herald migrated the database and it serves"
            + " only daemons that carry migration \(servedFrom) or later (herald.oldest_daemon_served()): install"
            + " the herald that migrated it (CHANGELOG.md, \"Upgrading\")"
    }
}
