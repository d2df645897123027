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
        #expect(applied.versions == Migration.embedded.map(\.version))
        #expect(applied.functionFiles == FunctionFile.embedded.map(\.name))
        let tables = try await connection.query(
            """
            SELECT array_agg(tablename::text ORDER BY tablename) FROM pg_tables t
            WHERE schemaname = 'herald'
              AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = format('herald.%I', t.tablename)::regclass)
              -- A provider's settings table is its migration's, and this test need not learn it.
              AND format('herald.%I', t.tablename) NOT IN (
                  SELECT settings::text FROM herald.providers WHERE settings IS NOT NULL)
            """
        )[0].decode(0, as: [String].self)
        #expect(
            tables == [
                "accepted_credentials", "activity_events", "activity_tokens", "app_config_problems",
                "app_webpush", "apps", "broadcast_channels",
                "config_scopes", "deliveries", "delivery_reports", "device_changes", "devices", "fcm_delivery_days",
                "fcm_delivery_reads", "fcm_quotas",
                "generations",
                "idempotency_keys", "jobs", "live_activities", "notifications", "platforms", "producer_apps",
                "provider_pauses",
                "providers", "push_type_tokens", "push_types", "receipt_nonces",
                "redrives", "route_saturation", "route_targets", "routes", "schema_functions", "schema_migrations",
                "secrets", "token_kinds", "transport_token_kinds", "wakeups", "worker_locks",
            ])

        let before = try await schemaSnapshot(connection)
        #expect(try await migrator.migrate(connection) == MigrationRun())
        #expect(try await schemaSnapshot(connection) == before)
        #expect(try await migrator.pending(connection).isEmpty)
        #expect(try await migrator.pendingFunctionFiles(connection).isEmpty)
    }

    @Test func concurrentMigratorsApplyEachMigrationOnce() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let results = try await withThrowingTaskGroup(of: MigrationRun.self) { group in
            for _ in 0..<4 {
                group.addTask { try await Migrator().migrate(try await database.connect()) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(
            results.filter { !$0.isEmpty } == [
                MigrationRun(
                    versions: Migration.embedded.map(\.version), functionFiles: FunctionFile.embedded.map(\.name),
                    fromBaseline: true)
            ])
        let connection = try await database.connect()
        let count = try await connection.query("SELECT count(*) FROM herald.schema_migrations")[0].decode(
            0, as: Int.self)
        #expect(count == Migration.embedded.count)
        let files = try await connection.query("SELECT count(*) FROM herald.schema_functions")[0].decode(
            0, as: Int.self)
        #expect(files == FunctionFile.embedded.count)
    }

    /// Any session can take the migration lock's key (a producer's, say): a run waits for it a
    /// bounded time, then fails naming the holder, and migrates once it is free.
    @Test(.timeLimit(.minutes(1))) func aRunWaitsForTheMigrationLockABoundedTimeAndNamesItsHolder() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let holder = try await database.connect()
        let pid = try await holder.query("SELECT pg_backend_pid()")[0].decode(0, as: Int32.self)
        try await holder.execute("SET application_name = 'a stuck job'")
        _ = try await holder.query("SELECT pg_advisory_lock($1)", [Int64(0x6865_7261_6c64)])
        var migrator = Migrator()
        migrator.lockWait = .milliseconds(300)
        let error = await #expect(throws: MigrationLockTimeout.self) {
            try await migrator.migrate(try await database.connect())
        }
        #expect(
            error?.holder.hasPrefix("pid \(pid) (role postgres, application 'a stuck job', idle since") == true,
            "\(error?.description ?? "")")
        _ = try await holder.query("SELECT pg_advisory_unlock_all()")
        #expect(try await migrator.migrate(try await database.connect()).fromBaseline)
    }

    /// A new database starts from the baseline; one migrated before it existed went through the
    /// numbered migrations. Both have the same schema (tables, columns, indexes, constraints,
    /// triggers, policies, grants, default privileges, notes, functions and views: pg_dump's
    /// whole text) and the same rows, but for the report key, random in each database.
    @Test func theBaselineAndTheNumberedMigrationsMakeTheSameDatabase() async throws {
        let baseline = try await TestDatabase.create(migrated: false)
        let run = try await Migrator().migrate(try await baseline.connect())
        #expect(
            run
                == MigrationRun(
                    versions: Migration.embedded.map(\.version), functionFiles: FunctionFile.embedded.map(\.name),
                    fromBaseline: true))
        let chain = try await SchemaSnapshotTests.migratedThroughTheNumberedMigrations()
        let difference = SchemaDump.firstDifference(
            try await SchemaDump.dump(chain.name, generations: true),
            try await SchemaDump.dump(baseline.name, generations: true))
        #expect(difference == nil, "the baseline's schema differs from the migrations' at \(difference ?? "")")
        let rows = try await Self.rows(try await chain.connect())
        #expect(rows.count > 60)
        #expect(try await Self.rows(try await baseline.connect()) == rows)
        // Each database made its own key.
        var keys: [String] = []
        for database in [chain, baseline] {
            keys.append(
                try await database.connect().query(
                    "SELECT encode(value, 'hex') FROM herald.secrets WHERE name = 'report_hmac'"
                )[0].decode(0, as: String.self))
        }
        // And a second database made from the baseline has a key of its own too: the
        // baseline carries none.
        let another = try await TestDatabase.create(migrated: false)
        try await Migrator().migrate(try await another.connect())
        keys.append(
            try await another.connect().query(
                "SELECT encode(value, 'hex') FROM herald.secrets WHERE name = 'report_hmac'"
            )[0].decode(0, as: String.self))
        #expect(keys.allSatisfy { $0.count == 96 } && Set(keys).count == 3)
        // The baseline's database moves on as a migrated one does: nothing is left to apply.
        #expect(try await Migrator().migrate(try await baseline.connect()).isEmpty)
        #expect(try await Migrator().pending(try await baseline.connect()).isEmpty)
    }

    /// Every row of every table of the schema, as text, but the migration records' times, the
    /// report key, and times set when the database was made (a generation's opening) as whether
    /// they are set.
    static func rows(_ connection: PostgresConnection) async throws -> [String] {
        try await connection.query(
            """
            SELECT c.relname || ' ' || x::text
            FROM pg_class c CROSS JOIN LATERAL unnest(xpath('//row', query_to_xml(format(
                       'SELECT %s FROM herald.%I', (SELECT string_agg(CASE WHEN a.atttypid = 'timestamptz'::regtype
                                                                           THEN format('%1$I IS NOT NULL AS %1$I', a.attname)
                                                                           ELSE quote_ident(a.attname) END, ', ')
                                                    FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                                                      AND a.attname NOT IN ('value', 'inner_pad', 'outer_pad')),
                       c.relname), false, false, ''))) x
            WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'r'
            ORDER BY 1
            """
        ).map { try $0.decode(0, as: String.self) }
    }

    /// A database an older herald migrated (the numbered migrations up to 015, before the
    /// function files existed) is moved forward by `herald migrate` to exactly the schema a
    /// fresh database gets: the function files hold what 000–015 left.
    @Test func aDatabaseMigratedBeforeFunctionFilesMovesForwardToTheSameSchema() async throws {
        let old = try await TestDatabase.create(migrated: false)
        let connection = try await old.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version <= 15 }, functionFiles: [])
            .migrate(connection)
        #expect(try await Migrator().pendingFunctionFiles(connection).count == FunctionFile.embedded.count)

        let run = try await Migrator().migrate(connection)
        #expect(run.versions == Migration.embedded.map(\.version).filter { $0 > 15 })
        #expect(run.functionFiles == FunctionFile.embedded.map(\.name))
        let fresh = try await TestDatabase.create()
        let difference = SchemaDump.firstDifference(
            try await SchemaDump.dump(fresh.name), try await SchemaDump.dump(old.name))
        #expect(difference == nil, "the moved database differs from a fresh one at \(difference ?? "")")
        #expect(try await Migrator().migrate(connection).isEmpty)
    }

    /// An edited function file is applied again, alone, and recorded; a file that fails leaves
    /// every file of the run unapplied.
    @Test func anEditedFunctionFileIsAppliedAgainAndOnlyIt() async throws {
        let connection = try await TestDatabase.create().connect()
        func edited(_ name: String, _ from: String, _ to: String) throws -> [FunctionFile] {
            try FunctionFile.embedded.map { file in
                guard file.name == name else { return file }
                try #require(file.sql.contains(from))
                return FunctionFile(name: name, sql: file.sql.replacingOccurrences(of: from, with: to))
            }
        }
        func fetchWindow() async throws -> String {
            try await connection.query("SELECT herald.fetch_window()::text")[0].decode(0, as: String.self)
        }
        #expect(try await fetchWindow() == "3 days")

        let longer = try edited("reconcile.sql", "SELECT interval '3 days'", "SELECT interval '4 days'")
        #expect(
            try await Migrator(functionFiles: longer).pendingFunctionFiles(connection).map(\.name) == ["reconcile.sql"])
        #expect(
            try await Migrator(functionFiles: longer).migrate(connection)
                == MigrationRun(functionFiles: ["reconcile.sql"]))
        #expect(try await fetchWindow() == "4 days")
        #expect(try await Migrator(functionFiles: longer).migrate(connection).isEmpty)

        // Back to the embedded text: applied again (and the daemon would wait for it).
        #expect(try await Migrator().pendingFunctionFiles(connection).map(\.name) == ["reconcile.sql"])
        #expect(try await Migrator().migrate(connection) == MigrationRun(functionFiles: ["reconcile.sql"]))
        #expect(try await fetchWindow() == "3 days")

        // Two files changed, the second broken: neither is applied, nothing is recorded.
        var broken = longer
        let retry = try #require(broken.firstIndex { $0.name == "retry.sql" })
        broken[retry].sql +=
            "\nCREATE OR REPLACE FUNCTION herald.broken() RETURNS int LANGUAGE sql AS $$ SELECT nope $$;\n"
        await #expect(throws: PostgresError.self) { try await Migrator(functionFiles: broken).migrate(connection) }
        #expect(try await fetchWindow() == "3 days")
        #expect(try await Migrator().migrate(connection).isEmpty)
    }

    /// A database a newer herald migrated (it has numbered migrations this binary lacks) keeps
    /// its function files: this binary's would put older text back.
    @Test func anOlderHeraldLeavesANewerDatabasesFunctionsAlone() async throws {
        let connection = try await TestDatabase.create().connect()
        try await connection.query(
            "INSERT INTO herald.schema_migrations (version, name, checksum) VALUES (9999, '9999_future', 'x')")
        let older = FunctionFile.embedded.map { FunctionFile(name: $0.name, sql: $0.sql + "\n-- older text\n") }
        #expect(try await Migrator(functionFiles: older).pendingFunctionFiles(connection).isEmpty)
        #expect(try await Migrator(functionFiles: older).migrate(connection).isEmpty)
    }

    /// The support window of a rolling upgrade (`herald.oldest_daemon_served()`): a database a
    /// newer release migrated serves this binary while that release still serves its daemons, and
    /// refuses it once it does not.
    @Test func aNewerReleasesSchemaServesThisBinaryOnlyWithinItsSupportWindow() async throws {
        let connection = try await TestDatabase.create().connect()
        let newest = try #require(Migration.embedded.last?.version)
        try await Migrator().checkServed(connection)
        #expect(
            try await connection.query("SELECT herald.oldest_daemon_served()")[0].decode(0, as: Int.self) < newest,
            "this release's schema serves the previous release's daemons")
        func newerRelease(servingFrom oldest: Int) async throws {
            try await connection.execute(
                """
                INSERT INTO herald.schema_migrations (version, name, checksum) VALUES (9999, '9999_future', 'x')
                ON CONFLICT DO NOTHING;
                CREATE OR REPLACE FUNCTION herald.oldest_daemon_served() RETURNS integer
                LANGUAGE sql IMMUTABLE AS $$ SELECT \(oldest) $$;
                """)
        }
        try await newerRelease(servingFrom: newest)
        try await Migrator().checkServed(connection)
        try await newerRelease(servingFrom: 9999)
        let refused = await #expect(throws: DaemonTooOld.self) { try await Migrator().checkServed(connection) }
        #expect(refused?.carried == newest && refused?.servedFrom == 9999, "\(String(describing: refused))")
    }

    /// Function files apply in name order, and SQL functions and views are checked when they
    /// are created: a function or view may use only what is defined before it (in an earlier
    /// file, or higher up in its own). Checked for every language, so that the rule is simple.
    @Test func functionFilesDefineBeforeUse() throws {
        // Every definition, in the order the migrator applies them, with the herald names it uses.
        var definitions: [(file: String, name: String, signature: String, uses: Set<String>)] = []
        for file in FunctionFile.embedded {
            let code = file.sql.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.replacing(/--.*$/, with: "") }.joined(separator: "\n")
            for piece in code.components(separatedBy: "CREATE OR REPLACE ").dropFirst() {
                guard let match = piece.firstMatch(of: /^(?:FUNCTION|VIEW) herald\.(\w+)(\([^)]*\))?/) else { continue }
                // herald.name, but not the herald.name: that starts an error message.
                let uses = Set(piece.matches(of: /herald\.(\w+)(?!\w|:)/).map { String($0.1) })
                definitions.append((file.name, String(match.1), String(match.0), uses))
            }
        }
        let names = definitions.map(\.name)
        // An overload (another signature of a name) is a definition of its own.
        let signatures = definitions.map(\.signature)
        #expect(Set(signatures).count == signatures.count, "a function or view is defined twice: \(signatures)")
        #expect(names.count > 40)
        for (index, definition) in definitions.enumerated() {
            for used in definition.uses.subtracting([definition.name]) {
                guard let at = names.firstIndex(of: used) else { continue }  // a table or a type
                #expect(
                    at < index,
                    "herald.\(definition.name) (\(definition.file)) uses herald.\(used), defined after it (\(definitions[at].file))"
                )
            }
        }
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

    @Test func embeddedFunctionFilesMatchTheSQLFiles() throws {
        let folder = packageRoot.appendingPathComponent("migrations/functions")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }
            .sorted()
        #expect(files == FunctionFile.embedded.map(\.name))
        for (file, embedded) in zip(files, FunctionFile.embedded) {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            #expect(
                text.trimmingCharacters(in: .newlines) == embedded.sql.trimmingCharacters(in: .newlines),
                "\(file) differs from what the EmbedMigrations plugin embedded")
        }
    }
}
