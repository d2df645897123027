import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldSchema
import HeraldTestSupport
import Testing

@Suite struct MigratorTests {
    /// Every herald object with its definition, to compare the schema before and after.
    func schemaSnapshot(_ connection: PostgresConnection) async throws -> [String] {
        try await connection.query(
            """
            SELECT c.relkind::text || ' ' || c.relname || ' ' || coalesce(pg_get_viewdef(c.oid), '') ||
                   coalesce((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum)
                             FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'herald' ORDER BY 1
            """
        ).map { try $0.decode(0, as: String.self) }
    }

    @Test func appliesOnAnEmptyDatabaseAndASecondRunChangesNothing() async throws {
        let connection = try await TestDatabase.create(migrated: false).connect()
        let migrator = Migrator()
        let applied = try await migrator.migrate(connection)
        #expect(applied == Migration.embedded.map(\.version))
        let tables = try await connection.query(
            "SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables WHERE schemaname = 'herald'"
        )[0].decode(0, as: [String].self)
        #expect(
            tables == [
                "app_config_problems", "apps", "deliveries", "delivery_reports", "devices", "jobs", "notifications",
                "producer_apps", "redrives",
                "schema_migrations", "secrets", "wakeups",
            ])

        let before = try await schemaSnapshot(connection)
        #expect(try await migrator.migrate(connection) == [])
        #expect(try await schemaSnapshot(connection) == before)
        #expect(try await migrator.pending(connection).isEmpty)
    }

    @Test func concurrentMigratorsApplyEachMigrationOnce() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let results = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<4 {
                group.addTask { try await Migrator().migrate(try await database.connect()) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { !$0.isEmpty } == [Migration.embedded.map(\.version)])
        let count = try await database.connect().query("SELECT count(*) FROM herald.schema_migrations")[0].decode(
            0, as: Int.self)
        #expect(count == Migration.embedded.count)
    }

    @Test func embeddedMigrationsMatchTheSQLFiles() throws {
        let folder = packageRoot.appendingPathComponent("migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }
            .sorted()
        #expect(files.map { String($0.dropLast(4)) } == Migration.embedded.map(\.name))
        for (file, migration) in zip(files, Migration.embedded) {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(
                text.trimmingCharacters(in: .newlines) == migration.sql.trimmingCharacters(in: .newlines),
                "\(file) differs from what the EmbedMigrations plugin embedded")
        }
    }
}
