import Foundation
import HeraldSchema
import HeraldTestSupport
import Testing

/// Two sets of files are written from a database the numbered migrations built, and checked
/// against one here; to rewrite them after adding a migration or changing a function file, run
/// this suite with `HERALD_WRITE_SCHEMA=1`, and read their diff:
/// - `docs/schema/`, the schema the migrations and function files add up to, one file per table
///   (``SchemaReference``), so a reader sees each table as it is, with the notes that explain it;
/// - `migrations/baseline/`, the schema a new database starts from (``SchemaBaseline``).
@Suite struct SchemaSnapshotTests {
    @Test func docsSchemaIsTheMigratedSchema() async throws {
        let database = try await Self.migratedThroughTheNumberedMigrations()
        let rendered = try await SchemaReference.render(try await database.connect())
        try Self.check(rendered, in: "docs/schema")
    }

    @Test func theBaselineIsTheMigratedSchema() async throws {
        let database = try await Self.migratedThroughTheNumberedMigrations()
        let rendered = try await SchemaBaseline.render(try await database.connect())
        try Self.check(rendered, in: "migrations/baseline")
    }

    /// A database made the way a database migrated before the baseline existed was: every
    /// numbered migration in turn, then the function files.
    static func migratedThroughTheNumberedMigrations() async throws -> TestDatabase {
        let database = try await TestDatabase.create(migrated: false)
        try await Migrator(baseline: nil).migrate(try await database.connect())
        return database
    }

    /// Checks (or, with `HERALD_WRITE_SCHEMA=1`, writes) the files of a directory of the package.
    static func check(_ rendered: [String: String], in path: String) throws {
        let directory = packageRoot.appendingPathComponent(path)
        let manager = FileManager.default
        if ProcessInfo.processInfo.environment["HERALD_WRITE_SCHEMA"] == "1" {
            try? manager.removeItem(at: directory)
            try manager.createDirectory(at: directory, withIntermediateDirectories: true)
            for (name, text) in rendered {
                try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
            }
        }
        let committed = Set((try? manager.contentsOfDirectory(atPath: directory.path)) ?? [])
        #expect(
            committed == Set(rendered.keys),
            "\(path)/ has other files than the ones written from the schema; run the test with HERALD_WRITE_SCHEMA=1")
        for (name, text) in rendered.sorted(by: { $0.key < $1.key }) {
            let written = (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
            let difference = SchemaDump.firstDifference(written, text)
            #expect(
                difference == nil,
                "\(path)/\(name) differs from the migrated schema at \(difference ?? ""); run the test with HERALD_WRITE_SCHEMA=1"
            )
        }
    }

    /// Every table of the `herald` schema, and every column, says what it holds (`COMMENT ON`),
    /// so that `\d+` explains it to an operator; every view says what it shows.
    @Test func everyTableAndColumnSaysWhatItHolds() async throws {
        let db = try await TestDatabase.create().connect()
        let silent = try await db.query(
            """
            SELECT c.relname || coalesce('.' || a.attname, '') FROM pg_class c
            JOIN pg_namespace s ON s.oid = c.relnamespace
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind <> 'v'
                                    AND coalesce(col_description(c.oid, a.attnum), '') = ''
            WHERE s.nspname = 'herald' AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition
              AND (a.attname IS NOT NULL OR coalesce(obj_description(c.oid, 'pg_class'), '') = '')
            ORDER BY 1
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(silent.isEmpty, "\(silent.count) without a COMMENT ON: \(silent.prefix(20).joined(separator: ", "))")
    }
}
