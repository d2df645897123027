import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// A daemon's sessions last for days, and a plan cached on a new deployment's small table, or on
/// a generation's partition just opened, went on reading the grown table whole once per
/// notification, until autovacuum's next ANALYZE (ingest fell to 200 a second at 2,500 in the
/// soak; recording a batch's outcomes took up to half a second after each generation opened).
/// Ingest, and dispatch's claim and record, keep one plan per session, made with nothing but
/// index probes and nested loops allowed, so that it reads the batch however the tables grew.
/// Autovacuum is off for the open generation's partitions here, as it is between its visits.
@Suite struct PlanningTests {
    /// A database with an app and a device, autovacuum off for `table`'s open partition.
    static func connection(withoutAutovacuumOn table: String) async throws -> PostgresConnection {
        let connection = try await TestDatabase.create().connect()
        try await connection.execute(
            """
            ALTER TABLE herald.\(table)_g1 SET (autovacuum_enabled = false);
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok', 'alice');
            """)
        return connection
    }

    /// Rows of `tables`' partitions this session read one by one (sequential scans), and entries
    /// of their indexes it read, not yet reported.
    static func tableReads(_ tables: String...) -> String {
        let partitions = tables.map { "SELECT relid FROM pg_partition_tree('herald.\($0)') WHERE isleaf" }
            .joined(separator: " UNION ALL ")
        return """
            SELECT (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(t.relid)), 0)::int FROM (\(partitions)) t),
                   (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::int
                    FROM pg_index i WHERE i.indrelid IN (\(partitions)))
            """
    }

    @Test func ingestReadsItsBatchNotTheTableItGrewInto() async throws {
        let connection = try await Self.connection(withoutAutovacuumOn: "notifications")
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
        // Rows read one by one (sequential scans), and index entries read, not yet reported
        // (this transaction's and some before it): compared before and after.
        let (rows, entries) = try await connection.transaction { session in
            let before = try session.query(Self.tableReads("notifications"))[0]
            _ = try session.query("SELECT herald.ingest_next(100)")
            let after = try session.query(Self.tableReads("notifications"))[0]
            return (
                try after.decode(0, as: Int.self) - before.decode(0, as: Int.self),
                try after.decode(1, as: Int.self) - before.decode(1, as: Int.self)
            )
        }
        print("ingesting 100 notifications read \(rows) rows one by one and \(entries) index entries")
        #expect(rows == 0, "ingesting 100 notifications read \(rows) rows of the table one by one")
        #expect(entries <= 1000, "ingesting 100 notifications read \(entries) index entries")
        let left = try await connection.query("SELECT count(*) FROM herald.notifications WHERE state = 'received'")
        #expect(try left[0].decode(0, as: Int.self) == 50000 - 100)
    }

    /// Records ids as sent through the dispatch worker's own statement.
    static func record(_ ids: [Int64], in session: PostgresSession) throws {
        let none: [String?] = ids.map { _ in nil }
        try session.query(
            DispatchWorker.SQL.record,
            [
                ids, ids.map { _ in "sent" }, none, none, ids.map { _ in Date().timeIntervalSince1970 },
                ids.map { _ in Double?.none }, ids.map { _ in false }, ids.map { _ in false }, "w",
                [Int64](), [String](), [String](), Date(), [String](), [String](), [String?](), none,
                [Double?](), [Int64](), [String](),
            ])
    }

    @Test func recordingOutcomesFindsItsDeliveriesNotThePartitionTheyGrewInto() async throws {
        let connection = try await Self.connection(withoutAutovacuumOn: "deliveries")
        try await connection.execute(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'n');
            SELECT herald.ingest_next(100);
            """)
        // Rows of the table's partitions this session read one by one, and entries of their
        // indexes, not yet reported (this transaction's and some before it): compared before and
        // after.
        let read = Self.tableReads("deliveries")
        // The session's first calls, on a partition of one row: the generic plan is made now.
        for _ in 1...10 { try await connection.withSession { try Self.record([-1], in: $0) } }
        // A batch's worth of rows sent, with their entries still in the index of queued ones.
        try await connection.execute(
            """
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at)
            SELECT notification_id, device_id, payload_kind, now() FROM herald.deliveries, generate_series(1, 50000);
            UPDATE herald.deliveries SET state = 'sent', sent_at = now(), finished_at = now(), run_at = NULL
            WHERE id NOT IN (SELECT id FROM herald.deliveries ORDER BY id DESC LIMIT 200);
            """)
        let queued = try await connection.query("SELECT id FROM herald.deliveries WHERE state = 'queued' ORDER BY id")
            .map { try $0.decode(0, as: Int64.self) }
        #expect(queued.count == 200)
        func recording(_ ids: ArraySlice<Int64>) async throws -> (rows: Int, entries: Int) {
            try await connection.transaction { session in
                let before = try session.query(read)[0]
                try Self.record(Array(ids), in: session)
                let after = try session.query(read)[0]
                return (
                    try after.decode(0, as: Int.self) - before.decode(0, as: Int.self),
                    try after.decode(1, as: Int.self) - before.decode(1, as: Int.self)
                )
            }
        }
        for half in [queued.prefix(100), queued.suffix(100)] {
            let read = try await recording(half)
            print("recording 100 outcomes read \(read.rows) rows one by one and \(read.entries) index entries")
            #expect(read.rows == 0 && read.entries <= 1000, "recording 100 outcomes read \(read)")
        }
        #expect(
            try await connection.query("SELECT count(*) FROM herald.deliveries WHERE state = 'queued'")[0].decode(
                0, as: Int.self) == 0)
    }

    @Test func claimingReadsItsBatchNotTheTablesItGrewInto() async throws {
        let connection = try await Self.connection(withoutAutovacuumOn: "deliveries")
        try await connection.execute("ALTER TABLE herald.notifications_g1 SET (autovacuum_enabled = false)")
        // The session's first claims, on tables of a few rows: the generic plan is made now.
        for _ in 1...10 {
            try await connection.execute(
                """
                INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'early');
                SELECT herald.ingest_next(100);
                SELECT count(*) FROM herald.claim_sends(now(), 100, 'w', interval '60 seconds');
                """)
        }
        // 50,000 notifications with their deliveries sent, and 200 queued.
        try await connection.execute(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title)
            SELECT 'shop', 'alice', 'later' FROM generate_series(1, 50200);
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, run_at, sent_at, finished_at)
            SELECT n.id, (SELECT id FROM herald.devices), 'android_data',
                   CASE WHEN n.number <= 50000 THEN 'sent' ELSE 'queued' END,
                   CASE WHEN n.number <= 50000 THEN NULL ELSE now() END,
                   CASE WHEN n.number <= 50000 THEN now() END, CASE WHEN n.number <= 50000 THEN now() END
            FROM (SELECT id, row_number() OVER (ORDER BY id) AS number FROM herald.notifications
                  WHERE title = 'later') AS n;
            """)
        // Rows of both tables read one by one, and index entries read, compared before and after,
        // as above.
        let read = Self.tableReads("deliveries", "notifications")
        let (claimed, rows, entries) = try await connection.transaction { session in
            let before = try session.query(read)[0]
            let claimed = try session.query(
                "SELECT count(*) FROM herald.claim_sends(now(), 100, 'w', interval '60 seconds')")[0].decode(
                    0, as: Int.self)
            let after = try session.query(read)[0]
            return (
                claimed, try after.decode(0, as: Int.self) - before.decode(0, as: Int.self),
                try after.decode(1, as: Int.self) - before.decode(1, as: Int.self)
            )
        }
        print("claiming 100 of 50,200 deliveries read \(rows) rows one by one and \(entries) index entries")
        #expect(claimed == 100)
        #expect(rows == 0 && entries <= 1000, "claiming 100 read \(rows) rows one by one, \(entries) index entries")
    }
}
