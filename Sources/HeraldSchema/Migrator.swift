import HeraldPostgres
import Logging

/// One numbered SQL file from `migrations/`.
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

/// Applies migrations in order, each in its own transaction, and records them in
/// `herald.schema_migrations` (created by migration 0).
///
/// A session-level advisory lock serializes migrators, so two hosts that migrate at once
/// are safe: the second waits, then finds nothing left to do. Running it again is a no-op.
public struct Migrator: Sendable {
    /// The advisory lock key (the bytes of "herald" read as a number).
    static let lockKey: Int64 = 0x6865_7261_6c64

    public var migrations: [Migration]
    let logger: Logger

    public init(migrations: [Migration] = Migration.embedded, logger: Logger = Logger(label: "herald.migrate")) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// Applies what is missing and returns the versions it applied.
    @discardableResult
    public func migrate(_ connection: PostgresConnection) async throws -> [Int] {
        let migrations = self.migrations
        let logger = self.logger
        return try await connection.withSession { session in
            try session.query(SQL.lock, [Self.lockKey])
            defer { _ = try? session.query(SQL.unlock, [Self.lockKey]) }
            // Migration 0 creates the table the others are recorded in; it changes nothing
            // once the table exists, so it runs first every time.
            if let bootstrap = migrations.first(where: { $0.version == 0 }) { try session.execute(bootstrap.sql) }
            var applied: [Int: String] = [:]
            for row in try session.query(SQL.applied) {
                applied[try row.decode(0, as: Int.self)] = try row.decode(1, as: String.self)
            }
            var newlyApplied: [Int] = []
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
                try session.transaction { session in
                    try session.execute(migration.sql)
                    try session.query(SQL.record, [migration.version, migration.name, migration.sql])
                }
                logger.info("applied migration \(migration.name)")
                newlyApplied.append(migration.version)
            }
            return newlyApplied
        }
    }

    /// The migrations this binary carries that the database has not applied (all of them on
    /// a database never migrated).
    public func pending(_ connection: PostgresConnection) async throws -> [Migration] {
        guard try await connection.query(SQL.hasTable)[0].decode(0, as: Bool.self) else { return migrations }
        let known = try await connection.query(SQL.versions)[0].decode(0, as: [Int].self)
        return migrations.filter { !known.contains($0.version) }
    }

    enum SQL {
        static let lock = "SELECT pg_advisory_lock($1)"
        static let unlock = "SELECT pg_advisory_unlock($1)"
        static let applied = "SELECT version, checksum FROM herald.schema_migrations"
        static let checksum = "SELECT md5($1)"
        static let record = "INSERT INTO herald.schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))"
        static let hasTable = "SELECT to_regclass('herald.schema_migrations') IS NOT NULL"
        static let versions = "SELECT coalesce(array_agg(version), '{}') FROM herald.schema_migrations"
    }
}
