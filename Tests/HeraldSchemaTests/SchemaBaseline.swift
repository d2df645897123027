import Foundation
import HeraldPostgres
import HeraldTestSupport

/// `migrations/baseline/`, the schema a new database starts from: what the numbered migrations
/// add up to, written out from a database they built, as SQL a reader can follow (a table, its
/// indexes, its notes and its grants together). `herald migrate` applies `tables.sql`, then the
/// function files, then `after_functions.sql`, in one transaction (``Migrator``).
///
/// Two files, because tables and functions need each other: a function file's views and
/// functions read tables, and some tables' triggers, policies, checks and generated columns
/// call functions, and rows name views. `after_functions.sql` holds the latter.
///
/// Rows are copied as they are, but for the two whose values are made when a database is
/// created: the report key in `herald.secrets` (random) and the generations' opening times.
enum SchemaBaseline {
    /// File name → text.
    static func render(_ db: PostgresConnection) async throws -> [String: String] {
        let version = try await db.query("SELECT max(version) FROM herald.schema_migrations")[0].decode(0, as: Int.self)
        var tables = """
            -- The schema after migration \(version), for a new database: `herald migrate` applies this file,
            -- then migrations/functions/, then after_functions.sql (migrations/README.md, "Two paths to
            -- one schema"). Generated from a database the numbered migrations built; never edited by
            -- hand. The notes on tables and columns are their COMMENT ONs.

            """
        var after = """
            -- What needs the functions and views: the checks and generated columns that call a function,
            -- the rows every database starts with (some name a view), triggers and row-level security
            -- policies. Applied after migrations/functions/, in the transaction that applied tables.sql;
            -- generated with it.

            """
        tables += try await roles(db)
        tables += try await types(db)
        tables += try await sequences(db)
        let trees = try await trees(db)
        for tree in trees {
            let (before, deferred) = try await render(tree, db)
            tables += before
            after += deferred
        }
        // Migration 000 makes the table before anything else; what it says and who reads it.
        tables += section("herald.schema_migrations") + (try await notesAndGrants("schema_migrations", db))
        tables += try await sequenceStates(db)
        after += try await rows(trees, db)
        after += try await reportKey(db)
        after += try await triggers(db)
        after += try await policies(db)
        return ["tables.sql": tables, "after_functions.sql": after]
    }

    static func strings(_ db: PostgresConnection, _ sql: String, _ parameters: [any PostgresEncodable] = [])
        async throws -> [[String]]
    {
        try await SchemaReference.strings(db, sql, parameters)
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    /// SQL for the relation of the schema that parameter $1 names.
    static let relation = "format('herald.%I', $1::text)::regclass"

    static func section(_ title: String) -> String {
        "\n-- " + title + "\n" + "-- " + String(repeating: "-", count: title.count) + "\n\n"
    }

    static func comment(on object: String, _ note: String) -> String {
        note.isEmpty ? "" : "COMMENT ON \(object) IS \(quoted(note));\n"
    }

    /// The roles the schema grants to, created if this cluster has none yet (another database's
    /// migration may have made them), the schema's own grants, and the default privileges new
    /// objects get (the daemon's).
    static func roles(_ db: PostgresConnection) async throws -> String {
        var text = section("Roles, the schema's grants, and what new objects grant")
        let grantees = try await strings(
            db,
            """
            SELECT x.grantee::regrole::text, string_agg(x.privilege_type, ', ' ORDER BY x.privilege_type)
            FROM pg_namespace n CROSS JOIN LATERAL unnest(n.nspacl) WITH ORDINALITY AS item(acl, position)
            CROSS JOIN LATERAL aclexplode(ARRAY[item.acl]) x
            WHERE n.nspname = 'herald' AND x.grantee <> n.nspowner GROUP BY item.position, x.grantee ORDER BY item.position
            """)
        for grantee in grantees {
            text += """
                DO $$
                BEGIN
                    CREATE ROLE \(grantee[0]) NOLOGIN;
                EXCEPTION WHEN duplicate_object OR unique_violation THEN
                    NULL;  -- created by another database's migration, or concurrently
                END;
                $$;

                """
        }
        text += "\n"
        for grantee in grantees { text += "GRANT \(grantee[1]) ON SCHEMA herald TO \(grantee[0]);\n" }
        for line in try await strings(
            db,
            """
            SELECT format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT %s ON %s TO %s;',
                          string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type),
                          CASE d.defaclobjtype WHEN 'r' THEN 'TABLES' WHEN 'S' THEN 'SEQUENCES' WHEN 'f' THEN 'FUNCTIONS'
                                               WHEN 'T' THEN 'TYPES' END,
                          a.grantee::regrole)
            FROM pg_default_acl d CROSS JOIN LATERAL aclexplode(d.defaclacl) a
            WHERE d.defaclnamespace = 'herald'::regnamespace AND a.grantee <> d.defaclrole
            GROUP BY d.defaclobjtype, a.grantee ORDER BY 1
            """)
        {
            text += line[0] + "\n"
        }
        return text
    }

    static func types(_ db: PostgresConnection) async throws -> String {
        var text = section("Composite types (what some functions return)")
        for type in try await strings(
            db,
            """
            SELECT t.typname::text,
                   (SELECT string_agg(format('    %I %s', a.attname, format_type(a.atttypid, a.atttypmod)), E',\n'
                                      ORDER BY a.attnum)
                    FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                   coalesce(obj_description(t.oid, 'pg_type'), '')
            FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
            WHERE t.typnamespace = 'herald'::regnamespace AND t.typtype = 'c' AND c.relkind = 'c' ORDER BY 1
            """)
        {
            text += "CREATE TYPE herald.\(type[0]) AS (\n\(type[1])\n);\n"
            text += comment(on: "TYPE herald.\(type[0])", type[2]) + "\n"
        }
        return text
    }

    /// The sequences no identity column owns (an identity column's comes with its table).
    static func sequences(_ db: PostgresConnection) async throws -> String {
        var text = section("Sequences")
        for sequence in try await strings(
            db,
            """
            SELECT c.relname::text, concat_ws(' ', CASE WHEN s.seqtypid <> 'bigint'::regtype THEN 'AS ' || format_type(s.seqtypid, NULL) END,
                                        CASE WHEN s.seqstart <> 1 THEN 'START WITH ' || s.seqstart END,
                                        CASE WHEN s.seqincrement <> 1 THEN 'INCREMENT BY ' || s.seqincrement END,
                                        CASE WHEN s.seqcache <> 1 THEN 'CACHE ' || s.seqcache END,
                                        CASE WHEN s.seqcycle THEN 'CYCLE' END),
                   coalesce(obj_description(c.oid, 'pg_class'), '')
            FROM pg_class c JOIN pg_sequence s ON s.seqrelid = c.oid
            WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'S'
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'i')
            ORDER BY 1
            """)
        {
            text += "CREATE SEQUENCE herald.\(sequence[0])\(sequence[1].isEmpty ? "" : " " + sequence[1]);\n"
            text += comment(on: "SEQUENCE herald.\(sequence[0])", sequence[2])
        }
        return text
    }

    /// A table with its partitions, all levels down, parents first; a table that is not
    /// partitioned is a tree of one.
    struct Tree {
        var members: [Member]
    }

    struct Member {
        var name: String
        var depth: Int
        var partitioned: Bool
    }

    /// The trees, each after the trees its foreign keys reference (ties in name order).
    static func trees(_ db: PostgresConnection) async throws -> [Tree] {
        let rows = try await strings(
            db,
            """
            WITH RECURSIVE tree AS (
                SELECT c.oid, c.oid AS root, 0 AS depth FROM pg_class c
                WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                  AND c.relname <> 'schema_migrations'
                UNION ALL
                SELECT i.inhrelid, t.root, t.depth + 1 FROM tree t JOIN pg_inherits i ON i.inhparent = t.oid
            )
            SELECT r.relname::text, c.relname::text, t.depth::text, (c.relkind = 'p')::text,
                   coalesce((SELECT string_agg(DISTINCT k.confrelid::regclass::text, ' ')
                             FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.confrelid <> c.oid), '')
            FROM tree t JOIN pg_class c ON c.oid = t.oid JOIN pg_class r ON r.oid = t.root
            ORDER BY 1, t.depth, 2
            """)
        var members: [String: [Member]] = [:]
        var references: [String: Set<String>] = [:]
        for row in rows {
            members[row[0], default: []].append(
                Member(name: row[1], depth: Int(row[2])!, partitioned: row[3] == "true"))
            for target in row[4].split(separator: " ") where target != "herald.\(row[0])" {
                references[row[0], default: []].insert(String(target.dropFirst("herald.".count)))
            }
        }
        var ordered: [Tree] = []
        var placed: Set<String> = []
        var remaining = members.keys.sorted()
        while !remaining.isEmpty {
            guard let next = remaining.first(where: { references[$0, default: []].isSubset(of: placed) }) else {
                throw SchemaDump.Failure("foreign keys in a cycle: \(remaining)")
            }
            ordered.append(Tree(members: members[next]!))
            placed.insert(next)
            remaining.removeAll { $0 == next }
        }
        return ordered
    }

    /// SQL that is true when the object `oid` of `catalog` (a constraint, a default or generated
    /// column) calls a function of the schema: then it waits for the function files.
    static func callsHeraldFunction(_ catalog: String, _ oid: String) -> String {
        """
        EXISTS (SELECT 1 FROM pg_depend dependency JOIN pg_proc f ON f.oid = dependency.refobjid
                WHERE dependency.classid = '\(catalog)'::regclass AND dependency.objid = \(oid)
                  AND dependency.refclassid = 'pg_proc'::regclass AND f.pronamespace = 'herald'::regnamespace)
        """
    }

    /// A tree's statements: those for tables.sql, and those that wait for the functions.
    static func render(_ tree: Tree, _ db: PostgresConnection) async throws -> (String, String) {
        let root = tree.members[0]
        var text = section("herald.\(root.name)")
        var after = ""
        // The notes on what waits for the functions wait with it (their statements' beginnings).
        var waiting: [String] = []
        // Checks the migrations added unchecked (NOT VALID, to tables with rows): added the same
        // way once the partitions are made, so that the partitions' copies are unchecked too.
        var unchecked: [String] = []
        for member in tree.members {
            let head = try await strings(
                db,
                """
                SELECT coalesce((SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid), ''),
                       coalesce(pg_get_expr(c.relpartbound, c.oid), ''), coalesce(pg_get_partkeydef(c.oid), ''),
                       coalesce(array_to_string(c.reloptions, ', '), ''), c.relrowsecurity::text,
                       c.relforcerowsecurity::text
                FROM pg_class c WHERE c.oid = \(relation)
                """, [member.name])[0]
            let partitionBy = head[2].isEmpty ? "" : " PARTITION BY \(head[2])"
            let with = head[3].isEmpty ? "" : " WITH (\(head[3]))"
            if !head[0].isEmpty {
                text += "CREATE TABLE herald.\(member.name) PARTITION OF \(head[0]) \(head[1])\(partitionBy)\(with);\n"
                // A default of its own (a generation that was the whole table once kept its own).
                for line in try await strings(
                    db,
                    """
                    SELECT format('ALTER TABLE herald.%I ALTER COLUMN %I SET DEFAULT %s;', $1::text, a.attname,
                                  coalesce(pg_get_expr(d.adbin, d.adrelid), 'NULL'))
                    FROM pg_attribute a JOIN pg_inherits i ON i.inhrelid = a.attrelid
                    JOIN pg_attribute p ON p.attrelid = i.inhparent AND p.attname = a.attname
                    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                    LEFT JOIN pg_attrdef pd ON pd.adrelid = p.attrelid AND pd.adnum = p.attnum
                    WHERE a.attrelid = \(relation) AND a.attnum > 0 AND NOT a.attisdropped
                      AND pg_get_expr(d.adbin, d.adrelid) IS DISTINCT FROM pg_get_expr(pd.adbin, pd.adrelid)
                    ORDER BY a.attnum
                    """, [member.name])
                {
                    text += line[0] + "\n"
                }
            } else {
                var lines: [String] = []
                var deferred: [String] = []
                for column in try await strings(
                    db,
                    """
                    SELECT format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod))
                           || CASE WHEN a.attcollation <> t.typcollation THEN format(' COLLATE %s', a.attcollation::regcollation) ELSE '' END
                           || CASE WHEN a.attgenerated = 's' THEN format(' GENERATED ALWAYS AS (%s) STORED', pg_get_expr(d.adbin, d.adrelid))
                                   WHEN d.adbin IS NOT NULL THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) ELSE '' END
                           || CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                                                 WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
                           || coalesce((SELECT ' (' || concat_ws(' ', CASE WHEN s.seqstart <> 1 THEN 'START WITH ' || s.seqstart END,
                                                                 CASE WHEN s.seqcache <> 1 THEN 'CACHE ' || s.seqcache END) || ')'
                                        FROM pg_sequence s
                                        WHERE a.attidentity <> '' AND s.seqrelid = pg_get_serial_sequence(format('herald.%I', $1::text), a.attname)::regclass
                                          AND (s.seqstart <> 1 OR s.seqcache <> 1)), '')
                           || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
                           (d.oid IS NOT NULL AND \(callsHeraldFunction("pg_attrdef", "d.oid")))::text,
                           format('COMMENT ON COLUMN herald.%I.%I ', $1::text, a.attname)
                    FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                    WHERE a.attrelid = \(relation) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
                    """, [member.name])
                {
                    if column[1] == "true" {
                        deferred.append(column[0])
                        waiting.append(column[2])
                    } else {
                        guard deferred.isEmpty else {
                            throw SchemaDump.Failure(
                                "herald.\(member.name): a column that calls a function is followed by one that does not"
                            )
                        }
                        lines.append(column[0])
                    }
                }
                for constraint in try await strings(
                    db,
                    """
                    SELECT format('CONSTRAINT %I %s', k.conname, pg_get_constraintdef(k.oid)), (\(callsHeraldFunction("pg_constraint", "k.oid")))::text,
                           format('COMMENT ON CONSTRAINT %I ON herald.%I ', k.conname, $1::text)
                    FROM pg_constraint k
                    WHERE k.conrelid = \(relation) AND k.conislocal
                      AND (k.contype = 'c' OR ($2 AND k.contype IN ('p', 'u', 'f', 'x')))
                    ORDER BY CASE k.contype WHEN 'p' THEN 0 WHEN 'u' THEN 1 WHEN 'x' THEN 2 WHEN 'f' THEN 3 ELSE 4 END, k.conname
                    """, [member.name, tree.members.count == 1])
                {
                    if constraint[1] == "true" {
                        after += "ALTER TABLE herald.\(member.name) ADD \(constraint[0]);\n"
                        waiting.append(constraint[2])
                    } else if constraint[0].hasSuffix(" NOT VALID") {
                        unchecked.append("ALTER TABLE herald.\(member.name) ADD \(constraint[0]);\n")
                    } else {
                        lines.append(constraint[0])
                    }
                }
                for column in deferred { after += "ALTER TABLE herald.\(member.name) ADD COLUMN \(column);\n" }
                text += "CREATE TABLE herald.\(member.name) (\n"
                text += lines.map { "    " + $0 }.joined(separator: ",\n") + "\n)\(partitionBy)\(with);\n"
            }
            if head[4] == "true" { text += "ALTER TABLE herald.\(member.name) ENABLE ROW LEVEL SECURITY;\n" }
            if head[5] == "true" { text += "ALTER TABLE herald.\(member.name) FORCE ROW LEVEL SECURITY;\n" }
        }
        text += unchecked.joined()
        // A partitioned table's keys and indexes, from the leaves up, each with the name it has:
        // made on a parent, an index takes the partitions' matching ones as its own.
        for member in tree.members.sorted(by: { ($0.depth, $0.name) > ($1.depth, $1.name) }) {
            if tree.members.count > 1 {
                for constraint in try await strings(
                    db,
                    """
                    SELECT format('ALTER TABLE herald.%I ADD CONSTRAINT %I %s;', $1::text, k.conname, pg_get_constraintdef(k.oid))
                    FROM pg_constraint k WHERE k.conrelid = \(relation) AND k.contype IN ('p', 'u', 'x') ORDER BY k.conname
                    """, [member.name])
                {
                    text += constraint[0] + "\n"
                }
            }
            for index in try await strings(
                db,
                """
                SELECT replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ') || ';'
                FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = \(relation)
                  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid)
                ORDER BY c.relname
                """, [member.name])
            {
                text += index[0] + "\n"
            }
        }
        for member in tree.members {
            for line in try await notesAndGrants(member.name, db).split(separator: "\n") {
                if waiting.contains(where: { line.hasPrefix($0) }) {
                    after += line + "\n"
                } else {
                    text += line + "\n"
                }
            }
        }
        return (text + "\n", after)
    }

    /// A table's notes (on it, its columns, constraints and indexes) and its grants, written as
    /// they differ from the default privileges a table gets.
    static func notesAndGrants(_ name: String, _ db: PostgresConnection) async throws -> String {
        var text = ""
        for note in try await strings(
            db,
            """
            SELECT format('COMMENT ON TABLE herald.%I IS %L;', $1::text, obj_description(\(relation), 'pg_class'))
            WHERE obj_description(\(relation), 'pg_class') IS NOT NULL
            UNION ALL
            SELECT * FROM (SELECT format('COMMENT ON COLUMN herald.%I.%I IS %L;', $1::text, a.attname, col_description(a.attrelid, a.attnum))
                           FROM pg_attribute a WHERE a.attrelid = \(relation) AND a.attnum > 0 AND NOT a.attisdropped
                             AND col_description(a.attrelid, a.attnum) IS NOT NULL ORDER BY a.attnum) columns
            UNION ALL
            SELECT * FROM (SELECT format('COMMENT ON CONSTRAINT %I ON herald.%I IS %L;', k.conname, $1::text, obj_description(k.oid, 'pg_constraint'))
                           FROM pg_constraint k WHERE k.conrelid = \(relation) AND obj_description(k.oid, 'pg_constraint') IS NOT NULL
                           ORDER BY k.conname) constraints
            UNION ALL
            SELECT * FROM (SELECT format('COMMENT ON INDEX herald.%I IS %L;', c.relname, obj_description(c.oid, 'pg_class'))
                           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                           WHERE i.indrelid = \(relation) AND obj_description(c.oid, 'pg_class') IS NOT NULL ORDER BY c.relname) indexes
            """, [name])
        {
            text += note[0] + "\n"
        }
        text += try await grants(on: name, defaults: "r", db)
        for grant in try await strings(
            db,
            """
            SELECT format('GRANT %s ON herald.%I TO %s;', string_agg(p.list, ', ' ORDER BY p.privilege_type), $1::text, p.grantee::regrole)
            FROM (SELECT x.grantee, x.privilege_type,
                         format('%s (%s)', x.privilege_type, string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)) AS list
                  FROM pg_attribute a CROSS JOIN LATERAL aclexplode(a.attacl) x
                  WHERE a.attrelid = \(relation) AND a.attacl IS NOT NULL GROUP BY x.grantee, x.privilege_type) p
            GROUP BY p.grantee ORDER BY p.grantee::regrole::text
            """, [name])
        {
            text += grant[0] + "\n"
        }
        return text
    }

    /// The `GRANT`s that give the relation `name` the privileges it has, beyond the default
    /// privileges of its kind (`r` tables, `S` sequences) it was made with. In the order the database keeps
    /// them (pg_dump prints them so): when that order does not start with the defaults, they
    /// are revoked and granted again in it.
    static func grants(on name: String, defaults kind: String, _ db: PostgresConnection) async throws -> String {
        let object = "herald.\(name)"
        func items(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws
            -> [(grantee: String, privileges: String)]
        {
            try await strings(
                db,
                """
                SELECT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END,
                       string_agg(x.privilege_type, ', ' ORDER BY x.privilege_type)
                FROM (\(sql)) acl CROSS JOIN LATERAL unnest(acl.items) WITH ORDINALITY AS item(acl, n)
                CROSS JOIN LATERAL aclexplode(ARRAY[item.acl]) x
                WHERE x.grantee <> acl.owner GROUP BY item.n, x.grantee ORDER BY item.n
                """, parameters
            ).map { ($0[0], $0[1]) }
        }
        let actual = try await items(
            "SELECT c.relacl AS items, c.relowner AS owner FROM pg_class c WHERE c.oid = \(relation)", [name])
        let defaults = try await items(
            """
            SELECT d.defaclacl AS items, d.defaclrole AS owner FROM pg_default_acl d
            WHERE d.defaclnamespace = 'herald'::regnamespace AND d.defaclobjtype = '\(kind)'
            """)
        let keepsDefaults =
            actual.count >= defaults.count
            && zip(actual, defaults).allSatisfy { $0.grantee == $1.grantee && $0.privileges == $1.privileges }
        var text = ""
        if !keepsDefaults {
            for item in defaults { text += "REVOKE ALL ON \(object) FROM \(item.grantee);\n" }
        }
        for item in keepsDefaults ? Array(actual.dropFirst(defaults.count)) : actual {
            text += "GRANT \(item.privileges) ON \(object) TO \(item.grantee);\n"
        }
        return text
    }

    /// Where each sequence stands (one the migrations used, by adding rows), what owns it, and
    /// its grants.
    static func sequenceStates(_ db: PostgresConnection) async throws -> String {
        var text = section("The sequences' owners, positions and grants")
        for sequence in try await strings(
            db,
            """
            SELECT c.relname::text,
                   coalesce((SELECT format('ALTER SEQUENCE herald.%I OWNED BY %s.%I;', c.relname, d.refobjid::regclass, a.attname)
                             FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                             WHERE d.objid = c.oid AND d.deptype = 'a' AND d.refclassid = 'pg_class'::regclass), ''),
                   (SELECT CASE WHEN s.last_value IS NOT NULL THEN format('SELECT setval(%L, %s);', 'herald.' || c.relname, s.last_value) ELSE '' END
                    FROM pg_sequences s WHERE s.schemaname = 'herald' AND s.sequencename = c.relname)
            FROM pg_class c WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'S' ORDER BY 1
            """)
        {
            let lines =
                (sequence[1].isEmpty ? "" : sequence[1] + "\n") + (sequence[2].isEmpty ? "" : sequence[2] + "\n")
                + (try await grants(on: sequence[0], defaults: "S", db))
            text += lines
        }
        return text
    }

    /// The rows the migrations put in, in the order of the trees, as `INSERT`s: not the report
    /// key (``reportKey(_:)``), and a time (a generation's opening) as `now()`, the day the
    /// database is made.
    static func rows(_ trees: [Tree], _ db: PostgresConnection) async throws -> String {
        var text = section("Rows every database starts with")
        for tree in trees {
            for member in tree.members
            where !member.partitioned && !["secrets", "schema_functions"].contains(member.name) {
                let columns = try await strings(
                    db,
                    """
                    SELECT quote_ident(a.attname),
                           CASE WHEN a.atttypid = 'timestamptz'::regtype
                                THEN format('CASE WHEN %1$I IS NULL OR NOT isfinite(%1$I) THEN quote_nullable(%1$I) ELSE ''now()'' END', a.attname)
                                WHEN a.atttypid IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'boolean'::regtype)
                                THEN format('coalesce(%1$I::text, ''NULL'')', a.attname)
                                ELSE format('quote_nullable(%I)', a.attname) END,
                           (a.attidentity = 'a')::text
                    FROM pg_attribute a
                    WHERE a.attrelid = format('herald.%I', $1::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped
                      AND a.attgenerated = ''
                    ORDER BY a.attnum
                    """, [member.name])
                let values = try await strings(
                    db,
                    "SELECT '(' || \(columns.map { $0[1] }.joined(separator: " || ', ' || ")) || ')' FROM herald.\(member.name) ORDER BY 1"
                )
                guard !values.isEmpty else { continue }
                text += "INSERT INTO herald.\(member.name) (\(columns.map { $0[0] }.joined(separator: ", ")))"
                text += columns.contains { $0[2] == "true" } ? " OVERRIDING SYSTEM VALUE VALUES\n" : " VALUES\n"
                text += values.map { "    " + $0[0] }.joined(separator: ",\n") + ";\n"
            }
        }
        return text
    }

    /// The key report references are signed with: random, made once per database, as migration
    /// 004 made it.
    static func reportKey(_ db: PostgresConnection) async throws -> String {
        let names = try await strings(db, "SELECT name FROM herald.secrets ORDER BY name").map { $0[0] }
        guard names == ["report_hmac"] else {
            throw SchemaDump.Failure("herald.secrets holds \(names); the baseline makes report_hmac only")
        }
        return """
            INSERT INTO herald.secrets (name, value)
            SELECT 'report_hmac',
                   decode(replace(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

            """
    }

    static func triggers(_ db: PostgresConnection) async throws -> String {
        var text = section("Triggers")
        for trigger in try await strings(
            db,
            """
            SELECT pg_get_triggerdef(t.oid) || ';',
                   CASE WHEN obj_description(t.oid, 'pg_trigger') IS NOT NULL
                        THEN format(E'\nCOMMENT ON TRIGGER %I ON %s IS %L;', t.tgname, t.tgrelid::regclass, obj_description(t.oid, 'pg_trigger'))
                        ELSE '' END
            FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE c.relnamespace = 'herald'::regnamespace AND NOT t.tgisinternal AND t.tgparentid = 0
            ORDER BY c.relname, t.tgname
            """)
        {
            text += trigger[0] + trigger[1] + "\n"
        }
        return text
    }

    static func policies(_ db: PostgresConnection) async throws -> String {
        var text = section("Row-level security policies")
        for policy in try await strings(
            db,
            """
            SELECT format('CREATE POLICY %I ON %s AS %s FOR %s TO %s', p.polname, p.polrelid::regclass,
                          CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                          CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                        WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                          (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END, ', ') FROM unnest(p.polroles) r))
                   || coalesce(E'\n    USING (' || pg_get_expr(p.polqual, p.polrelid) || ')', '')
                   || coalesce(E'\n    WITH CHECK (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')', '') || ';',
                   CASE WHEN obj_description(p.oid, 'pg_policy') IS NOT NULL
                        THEN format(E'\nCOMMENT ON POLICY %I ON %s IS %L;', p.polname, p.polrelid::regclass, obj_description(p.oid, 'pg_policy'))
                        ELSE '' END
            FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
            WHERE c.relnamespace = 'herald'::regnamespace ORDER BY c.relname, p.polname
            """)
        {
            text += policy[0] + policy[1] + "\n"
        }
        return text
    }
}
