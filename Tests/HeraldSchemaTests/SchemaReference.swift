import Foundation
import HeraldPostgres

/// `docs/schema/`, the schema's reference as a reader wants it: one Markdown file per table of
/// the `herald` schema (its columns with their notes from the catalog, constraints, indexes,
/// triggers, row-level security and grants), `roles.md` (the roles and who may call or read
/// what), and `README.md` (the tables, views and composite types, each with its note). The
/// functions' and views' text is in `migrations/functions/`, their one home. Made from a migrated
/// database's catalog, so it says what the database holds, in a stable order.
enum SchemaReference {
    /// File name → text.
    static func render(_ db: PostgresConnection) async throws -> [String: String] {
        var files: [String: String] = [:]
        let tables = try await db.query(
            """
            SELECT c.relname::text, coalesce(obj_description(c.oid, 'pg_class'), ''), c.relkind = 'p', c.relrowsecurity
            FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
            WHERE s.nspname = 'herald' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1
            """
        ).map {
            (
                name: try $0.decode(0, as: String.self), note: try $0.decode(1, as: String.self),
                partitioned: try $0.decode(2, as: Bool.self), secured: try $0.decode(3, as: Bool.self)
            )
        }
        for table in tables {
            files["\(table.name).md"] = try await renderTable(
                db, table.name, note: table.note, partitioned: table.partitioned, secured: table.secured)
        }
        files["roles.md"] = try await renderRoles(db)
        files["README.md"] = try await renderIndex(db, tables: tables.map { ($0.name, $0.note) })
        return files
    }

    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "|", with: "\\|")
    }

    /// Each row's columns as text.
    static func strings(_ db: PostgresConnection, _ sql: String, _ parameters: [any PostgresEncodable] = [])
        async throws -> [[String]]
    {
        let result = try await db.query(sql, parameters)
        return try result.map { row in try (0..<result.columnCount).map { try row.decode($0, as: String?.self) ?? "" } }
    }

    static func renderTable(_ db: PostgresConnection, _ name: String, note: String, partitioned: Bool, secured: Bool)
        async throws -> String
    {
        // $1 is the table's name; each query reads one kind of thing about it.
        let relation = "format('herald.%I', $1::text)::regclass"
        var text = "# herald.\(name)\n\n\(note.isEmpty ? "(no note)" : note)\n\n"
        if partitioned {
            text +=
                "Partitioned by generation (`docs/scaling.md`, \"Time partitions\"); what follows is the parent's.\n\n"
        }
        text += "| column | type | null | default | what it holds |\n|---|---|---|---|---|\n"
        for column in try await strings(
            db,
            """
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attnotnull THEN 'not null' ELSE '' END,
                   CASE WHEN a.attidentity <> '' THEN 'identity' ELSE coalesce(pg_get_expr(d.adbin, d.adrelid), '') END,
                   coalesce(col_description(a.attrelid, a.attnum), '')
            FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = \(relation) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
            """, [name])
        {
            text += "| `\(column[0])` | \(column[1]) | \(column[2]) | \(cell(column[3])) | \(cell(column[4])) |\n"
        }
        let sections: [(String, String)] = [
            (
                "Constraints",
                """
                SELECT format('`%s`: %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint
                WHERE conrelid = \(relation) AND contype <> 't' ORDER BY conname
                """
            ),
            (
                "Indexes",
                """
                SELECT format('`%s`: %s', c.relname, pg_get_indexdef(i.indexrelid))
                FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = \(relation)
                  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid)
                ORDER BY c.relname
                """
            ),
            (
                "Triggers",
                """
                SELECT format('`%s`: %s', tgname, pg_get_triggerdef(oid)) FROM pg_trigger
                WHERE tgrelid = \(relation) AND NOT tgisinternal ORDER BY tgname
                """
            ),
            (
                "Row-level security",
                """
                SELECT format('`%s`: FOR %s TO %s%s%s', p.polname,
                              CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE'
                                            WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                              (SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE r::regrole::text END, ', ')
                               FROM unnest(p.polroles) AS r),
                              ' USING (' || pg_get_expr(p.polqual, p.polrelid) || ')',
                              ' WITH CHECK (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')')
                FROM pg_policy p WHERE p.polrelid = \(relation) ORDER BY p.polname
                """
            ),
            (
                "Grants",
                """
                SELECT format('%s: %s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
                              string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type))
                FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
                WHERE c.oid = \(relation) AND a.grantee <> c.relowner GROUP BY a.grantee
                UNION ALL
                SELECT format('%s: %s (%s)', CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                              g.privilege_type, string_agg(g.attname, ', ' ORDER BY g.attnum))
                FROM (SELECT a.attname, a.attnum, x.grantee, x.privilege_type
                      FROM pg_attribute a CROSS JOIN LATERAL aclexplode(a.attacl) x
                      WHERE a.attrelid = \(relation) AND a.attacl IS NOT NULL) g
                GROUP BY g.grantee, g.privilege_type
                ORDER BY 1
                """
            ),
        ]
        for (title, sql) in sections {
            let lines = try await strings(db, sql, [name]).map { $0[0] }
            if lines.isEmpty && !(title == "Row-level security" && secured) { continue }
            text += "\n## \(title)\n\n"
            if title == "Row-level security" { text += "Enabled.\n" + (lines.isEmpty ? "" : "\n") }
            text += lines.map { "- \(cell($0))\n" }.joined()
        }
        return text
    }

    static func renderRoles(_ db: PostgresConnection) async throws -> String {
        var text = """
            # Roles and grants

            Herald's roles, what each is a member of, and who may call each function or read each
            view of the `herald` schema (besides its owner, the role that runs `herald migrate`).
            `docs/operators.md` says what each role is for.

            | role | member of | can log in |
            |---|---|---|

            """
        for row in try await strings(
            db,
            """
            SELECT r.rolname::text,
                   coalesce((SELECT string_agg(g.rolname, ', ' ORDER BY g.rolname) FROM pg_auth_members m
                             JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid), ''),
                   CASE WHEN r.rolcanlogin THEN 'yes' ELSE 'no' END
            FROM pg_roles r WHERE r.rolname LIKE 'herald\\_%' ORDER BY 1
            """)
        {
            text += "| `\(row[0])` | \(row[1]) | \(row[2]) |\n"
        }
        text += "\n## Schema\n\n"
        for row in try await strings(
            db,
            """
            SELECT format('%s: %s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
                          string_agg(a.privilege_type, ', ' ORDER BY a.privilege_type))
            FROM pg_namespace s CROSS JOIN LATERAL aclexplode(s.nspacl) a
            WHERE s.nspname = 'herald' AND a.grantee <> s.nspowner GROUP BY a.grantee ORDER BY 1
            """)
        {
            text += "- \(row[0])\n"
        }
        text += "\n## Functions\n\n| function | may call it |\n|---|---|\n"
        for row in try await strings(
            db,
            """
            SELECT format('herald.%s(%s)', p.proname, pg_get_function_identity_arguments(p.oid)),
                   coalesce((SELECT string_agg(g.name, ', ' ORDER BY g.name)
                             FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS name
                                   FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                                   WHERE a.grantee <> p.proowner) g), '(its owner only)')
            FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
            WHERE s.nspname = 'herald' ORDER BY 1
            """)
        {
            text += "| `\(cell(row[0]))` | \(row[1]) |\n"
        }
        text += "\n## Views\n\n| view | may read it |\n|---|---|\n"
        for row in try await strings(
            db,
            """
            SELECT format('herald.%s', c.relname),
                   coalesce((SELECT string_agg(DISTINCT a.grantee::regrole::text, ', ' ORDER BY a.grantee::regrole::text)
                             FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner AND a.privilege_type = 'SELECT'),
                            '(its owner only)')
            FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
            WHERE s.nspname = 'herald' AND c.relkind IN ('v', 'm') ORDER BY 1
            """)
        {
            text += "| `\(row[0])` | \(row[1]) |\n"
        }
        return text
    }

    static func renderIndex(_ db: PostgresConnection, tables: [(String, String)]) async throws -> String {
        var text = """
            # The `herald` schema

            Generated from a migrated database's catalog by `SchemaSnapshotTests`
            (`HERALD_WRITE_SCHEMA=1` rewrites it); read it, never edit it. Each table's file lists its
            columns with their notes (the same notes `\\d+ herald.<table>` shows), its constraints,
            indexes, triggers, row-level security and grants. The functions and views are written in
            [`migrations/functions/`](../../migrations/functions/); [roles.md](roles.md) says who may
            call or read each.

            ## Tables

            | table | what a row is |
            |---|---|

            """
        for (name, note) in tables { text += "| [`herald.\(name)`](\(name).md) | \(cell(note)) |\n" }
        text += "\n## Views\n\n| view | what it shows |\n|---|---|\n"
        for row in try await strings(
            db,
            """
            SELECT c.relname::text, coalesce(obj_description(c.oid, 'pg_class'), '')
            FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
            WHERE s.nspname = 'herald' AND c.relkind IN ('v', 'm') ORDER BY 1
            """)
        {
            text += "| `herald.\(row[0])` | \(cell(row[1])) |\n"
        }
        text += "\n## Composite types\n\nWhat a dispatch batch records (`herald.record_sends`), one value each.\n\n"
        text += "| type | fields |\n|---|---|\n"
        for row in try await strings(
            db,
            """
            SELECT t.typname::text,
                   string_agg(format('`%s` %s', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
            FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
            JOIN pg_namespace s ON s.oid = t.typnamespace
            JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            WHERE s.nspname = 'herald' GROUP BY t.typname ORDER BY 1
            """)
        {
            text += "| `herald.\(row[0])` | \(row[1]) |\n"
        }
        return text
    }
}
