import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldSchema

/// A database of its own for one test, in the cluster that `scripts/test.sh` started
/// (found through the standard `PGHOST`, `PGPORT` and `PGUSER` variables).
///
/// Migrated databases are cloned from a template that is migrated once per test run, so
/// each test starts from the real schema in milliseconds and tests can run in parallel.
public struct TestDatabase: Sendable {
    public let name: String

    /// The libpq connection string for this database.
    public var conninfo: String { "dbname=\(name)" }

    /// Opens a new connection to this database.
    public func connect() async throws -> PostgresConnection {
        try await PostgresConnection.connect(conninfo)
    }

    /// Creates a database: empty, or with every migration applied.
    public static func create(migrated: Bool = true) async throws -> TestDatabase {
        guard ProcessInfo.processInfo.environment["PGPORT"] != nil else {
            throw PostgresError(
                .usage,
                "PGHOST/PGPORT are not set: run the tests with scripts/test.sh, which starts a private PostgreSQL")
        }
        let name = "herald_test_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try await PostgresConnection.connect("dbname=postgres")
        defer { Task { await admin.close() } }
        if migrated {
            try await TemplateDatabase.shared.ensure()
            try await admin.execute("CREATE DATABASE \(name) TEMPLATE \(TemplateDatabase.name)")
        } else {
            try await admin.execute("CREATE DATABASE \(name)")
        }
        return TestDatabase(name: name)
    }
}

/// The migrated template, built once per process (and guarded across processes by a lock).
actor TemplateDatabase {
    static let shared = TemplateDatabase()
    static let name = "herald_test_template"
    private var ready: Task<Void, any Error>?

    func ensure() async throws {
        if ready == nil { ready = Task { try await Self.build() } }
        try await ready!.value
    }

    private static func build() async throws {
        let admin = try await PostgresConnection.connect("dbname=postgres")
        defer { Task { await admin.close() } }
        try await admin.query("SELECT pg_advisory_lock(4242)")
        defer { Task { try? await admin.query("SELECT pg_advisory_unlock(4242)") } }
        // Rebuilt each run, so the template always carries the migrations of this checkout.
        try await admin.execute("DROP DATABASE IF EXISTS \(name)")
        try await admin.execute("CREATE DATABASE \(name)")
        let template = try await PostgresConnection.connect("dbname=\(name)")
        try await Migrator().migrate(template)
        await template.close()
    }
}
