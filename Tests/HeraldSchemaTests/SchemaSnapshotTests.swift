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
            let difference = Self.firstDifference(written, text)
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

    /// The schema as pg_dump prints it, without the lines that name versions or carry a random
    /// key (`\restrict`), so the same schema always gives the same text: two databases' dumps are
    /// compared whole (``MigratorTests``). Without the generations' partitions unless asked: they
    /// differ between databases of different ages.
    static func dump(_ database: String, generations: Bool = false) async throws -> String {
        let bundled = "/usr/lib/postgresql/15/bin/pg_dump"
        // The generations' partitions come and go (migrations 020 and 022): the parents say what
        // they are.
        let (status, output) = try await runProgram(
            FileManager.default.isExecutableFile(atPath: bundled) ? bundled : "/usr/bin/pg_dump",
            ["--schema-only", "--no-owner", "--schema=herald"]
                + (generations
                    ? []
                    : [
                        "--exclude-table=herald.notifications_g[0-9]*", "--exclude-table=herald.deliveries_g[0-9]*",
                        "--exclude-table=herald.delivery_reports_g[0-9]*",
                    ]) + [database])
        guard status == 0 else { throw SnapshotError("pg_dump exited \(status): \(output)") }
        return output.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in
                !line.hasPrefix("-- Dumped ") && !line.hasPrefix("\\restrict") && !line.hasPrefix("\\unrestrict")
            }
            .joined(separator: "\n")
    }

    struct SnapshotError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func firstDifference(_ a: String, _ b: String) -> String? {
        let left = a.split(separator: "\n", omittingEmptySubsequences: false)
        let right = b.split(separator: "\n", omittingEmptySubsequences: false)
        for index in 0..<max(left.count, right.count) {
            let l = index < left.count ? String(left[index]) : "(end)"
            let r = index < right.count ? String(right[index]) : "(end)"
            if l != r { return "line \(index + 1): \"\(l)\" vs \"\(r)\"" }
        }
        return nil
    }
}
