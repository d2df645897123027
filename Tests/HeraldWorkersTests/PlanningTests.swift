import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

/// Ingest is planned for the table as it is when it runs, not as it was when the session first
/// ran it: a daemon's sessions last for days, and a plan cached on a new deployment's small table
/// went on reading the grown table whole once per notification, until autovacuum's next ANALYZE
/// (ingest fell to 200 a second at 2,500 in the soak). Autovacuum is off for the open
/// generation's partition here, as it is between its visits.
@Suite struct PlanningTests {
    @Test func ingestReadsItsBatchNotTheTableItGrewInto() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        try await connection.execute(
            """
            ALTER TABLE herald.notifications_g1 SET (autovacuum_enabled = false);
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok', 'alice');
            """)
        // The session's first calls, on a table of a few rows.
        for _ in 1...10 {
            try await connection.execute(
                """
                INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'early');
                SELECT herald.ingest_next(100);
                """)
        }
        try await connection.execute(
            "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'shop', 'alice', 'later' FROM generate_series(1, 50000)"
        )
        // Rows read one by one (sequential scans) in this transaction alone.
        let read = try await connection.transaction { session in
            _ = try session.query("SELECT herald.ingest_next(100)")
            return try session.query(
                """
                SELECT sum(s.seq_tup_read)::int FROM pg_stat_xact_user_tables s
                JOIN pg_partition_tree('herald.notifications') t ON t.relid = s.relid AND t.isleaf
                """)[0].decode(0, as: Int.self)
        }
        #expect(read == 0, "ingesting 100 notifications read \(read) rows of the table one by one")
        let left = try await connection.query("SELECT count(*) FROM herald.notifications WHERE state = 'received'")
        #expect(try left[0].decode(0, as: Int.self) == 50000 - 100)
    }
}
