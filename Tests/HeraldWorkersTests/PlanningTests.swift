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
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
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
        let sent = ids.map { DispatchWorker.SendOutcome(id: $0, result: DeliveryResult(state: .sent), now: Date()) }
        try session.query(
            DispatchWorker.SQL.record,
            [
                sent, "w", Date(), [DispatchWorker.DeadToken](), [DispatchWorker.DeadToken](),
                [DispatchWorker.ConfigProblem](), [DispatchWorker.DeadToken](),
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
                SELECT count(*) FROM herald.claim_batch(now(), 100, 'w', interval '60 seconds');
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
                "SELECT count(*) FROM herald.claim_batch(now(), 100, 'w', interval '60 seconds')")[0].decode(
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

    // MARK: Every hot-path statement, whatever the statistics were when its plan was made

    /// Index entries and rows every table of the herald schema returned to this transaction so
    /// far: (rows read one by one by sequential scans, index entries).
    static let everyTableRead = """
        WITH tables AS (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'r')
        SELECT (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(t.oid)), 0)::int FROM tables t),
               (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)::int
                FROM pg_index i WHERE i.indrelid IN (SELECT oid FROM tables))
        """

    /// What one of the workers' statements read, run in a transaction of its own.
    struct Reading: CustomStringConvertible {
        var statement: String
        var rows: Int
        var entries: Int
        var description: String { "\(statement): \(rows) rows one by one, \(entries) index entries" }
    }

    /// One round of a day's work for `users` users (`phone-1` …, half Android and half iPhones
    /// through FCM), on `connection`'s session, each statement as its worker runs it: ingest
    /// (leasing half at birth), the claim, a lease extension, the record, the reconcile of a report
    /// for every delivery, and the retry worker's pass. Returns what each statement read.
    static func round(of users: Int, on connection: PostgresConnection) async throws -> [Reading] {
        func reading<T: Sendable>(_ statement: String, _ body: @escaping @Sendable (PostgresSession) throws -> T)
            async throws -> (Reading, T)
        {
            // The counts not yet reported start from nothing: the session reports them as it goes
            // idle after this statement.
            try await connection.query("SELECT pg_stat_force_next_flush()")
            return try await connection.transaction { session in
                let before = try session.query(Self.everyTableRead)[0]
                let result = try body(session)
                let after = try session.query(Self.everyTableRead)[0]
                let reading = Reading(
                    statement: statement, rows: try after.decode(0, as: Int.self) - before.decode(0, as: Int.self),
                    entries: try after.decode(1, as: Int.self) - before.decode(1, as: Int.self))
                return (reading, result)
            }
        }
        try await connection.execute(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title)
            SELECT 'shop', 'user-' || g, 'now' FROM generate_series(1, \(users)) g
            """)
        // Half leased at birth, read by the claim beside the half it claims from the queue.
        let (ingest, leased) = try await reading("ingest") { session in
            try session.query(IngestWorker.SQL.ingestNext, [users, Date(), "w", 60.0, users / 2, 1800.0, [Int64]()])[0]
                .decode("leased", as: [Int64].self)
        }
        let (claim, claimed) = try await reading("claim") { session in
            try session.query(DispatchWorker.SQL.claim, [Date(), users - leased.count, "w", 60.0, leased]).map {
                try $0.decode(0, as: Int64.self)
            }
        }
        let queued = claimed.filter { !leased.contains($0) }
        #expect(leased.count == users / 2 && claimed.count == users, "read \(leased.count), claimed \(queued.count)")
        let (extend, _) = try await reading("lease extension") { session in
            try session.query(DispatchWorker.SQL.extendLeases, [claimed, "w", Date(), 60.0], planning: .eachCall)
        }
        let (record, _) = try await reading("record") { session in try Self.record(claimed, in: session) }
        let reports = try await connection.query(
            """
            INSERT INTO herald.delivery_reports (reference, delivery_id, device_id)
            SELECT 'test', d.id, d.device_id FROM herald.deliveries d WHERE d.id = ANY($1::bigint[])
            RETURNING id
            """, [claimed]
        ).map { try $0.decode(0, as: Int64.self) }
        let (reconcile, _) = try await reading("reconcile") { session in
            try session.query(ReconcileWorker.SQL.reconcile, [reports, Date(), 1800.0, 60.0])
        }
        let (retry, _) = try await reading("retry pass") { session in
            try session.query(HopelessRetries.SQL.endHopelessRetries, [Date(), users])
        }
        return [ingest, claim, extend, record, reconcile, retry]
    }

    /// The open generation filled with `count` notifications of the day, finished: each sent to
    /// one of 10,000 other phones, two hours ago.
    static func fillTheDay(with count: Int, on connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            WITH day AS (
                INSERT INTO herald.notifications (app_id, user_ref, title, state, ingested_at)
                SELECT 'shop', 'other-' || (g % 10000 + 1), 'earlier', 'accepted', now() - interval '2 hours'
                FROM generate_series(1, \(count)) g
                RETURNING id, user_ref)
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, attempts, sent_at, finished_at)
            SELECT day.id, d.id, CASE WHEN d.platform = 'ios' THEN 'ios_alert' ELSE 'android_data' END, 'sent', 1,
                   now() - interval '2 hours', now() - interval '2 hours'
            FROM day JOIN herald.devices d ON d.app_id = 'shop' AND d.device_id = day.user_ref;
            """)
    }

    /// Every statement on the workers' hot path reads rows in proportion to its batch, whether
    /// its plan was made on a generation analyzed with a few rows that then grew to a day's
    /// million notifications, on the full tables' statistics, on full tables later emptied, on
    /// emptied ones that grew again, or on partitions never analyzed. (Measured by rows and index entries read, not by time.) Before
    /// the claim's lookups were fenced, a plan made on a day's statistics read every notification
    /// of the open generation once per claimed delivery (#39).
    @Test func everyHotStatementReadsItsBatchWhateverItsPlanWasMadeOn() async throws {
        let connection = try await TestDatabase.create().connect()
        let users = 100
        try await connection.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
            SELECT 'shop', 'phone-' || g, CASE WHEN g % 2 = 0 THEN 'android' ELSE 'ios' END, 'token-' || g, 'user-' || g
            FROM generate_series(1, \(users)) g
            UNION ALL
            SELECT 'shop', 'other-' || g, CASE WHEN g % 2 = 0 THEN 'android' ELSE 'ios' END, 'other-' || g, 'other-' || g
            FROM generate_series(1, 10000) g;
            """)
        // Autovacuum would analyze the tables at moments of its own choosing; here the test does.
        try await connection.execute(
            """
            DO $$ DECLARE t regclass; BEGIN
                FOR t IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'herald'::regnamespace AND c.relkind = 'r' LOOP
                    EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t);
                END LOOP;
            END $$;
            """)
        let analyze = "ANALYZE herald.notifications, herald.deliveries, herald.devices, herald.delivery_reports"
        // Plans are made for each statement by its sixth call at the latest (plpgsql's and the
        // prepared statements' generic plans), and kept until the statistics change.
        func makePlans(size: Int = users) async throws {
            for _ in 1...6 { _ = try await Self.round(of: size, on: connection) }
        }
        func check(_ phase: String) async throws {
            for reading in try await Self.round(of: users, on: connection) {
                print("\(phase): \(reading)")
                // A few rows or index entries per notification and table; a table read whole would
                // be thousands.
                #expect(
                    reading.rows + reading.entries <= 30 * users, "\(phase): \(reading) for \(users) notifications")
            }
        }
        // As autovacuum leaves a new deployment in its first minute: the open generation analyzed
        // while it held a few rows. (A plan made then once read the partition whole for every
        // ingest, comparing each row with each notification of the batch, until the next ANALYZE.)
        _ = try await Self.round(of: 5, on: connection)
        try await connection.execute("ANALYZE herald.notifications_g1, herald.deliveries_g1, herald.devices")
        try await makePlans(size: 5)
        try await Self.fillTheDay(with: 1_000_000, on: connection)
        try await check("plans made on a generation analyzed with a few rows, then a day of 1,000,000 notifications")
        try await connection.execute(analyze)
        try await makePlans()
        try await check("plans made on the day's statistics")
        try await connection.execute(
            "DELETE FROM herald.deliveries WHERE state <> 'queued'; DELETE FROM herald.notifications WHERE title = 'earlier'"
        )
        try await check("plans made on the day's statistics, the tables then emptied")
        try await connection.execute(analyze)
        try await makePlans()
        try await Self.fillTheDay(with: 200_000, on: connection)
        try await check("plans made on emptied tables' statistics, then 200,000 notifications")
        // A generation that was never analyzed (a new one opens empty, and autovacuum has not come).
        try await connection.execute("TRUNCATE herald.notifications, herald.deliveries, herald.delivery_reports")
        try await makePlans(size: 5)
        try await Self.fillTheDay(with: 200_000, on: connection)
        try await check("plans made on emptied partitions, then 200,000 notifications")
    }

    /// Every delivery's lease leaves a dead entry in the due index, at a time still to come;
    /// once that time has passed each claim walks over it, and only a vacuum that cleans the
    /// indexes removes it. A vacuum that finds dead rows on under 2% of a large partition's pages
    /// would skip its indexes: the partitions of deliveries are told never to (migration 030).
    @Test func aVacuumOfALargePartitionCleansTheDueIndexHoweverFewRowsDied() async throws {
        let connection = try await Self.connection(withoutAutovacuumOn: "deliveries")
        // A day of sent deliveries, vacuumed.
        try await connection.execute(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'the day');
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, attempts, sent_at, finished_at, run_at)
            SELECT n.id, dev.id, 'android_data', 'sent', 1, now(), now(), NULL
            FROM herald.notifications n, herald.devices dev, generate_series(1, 400000);
            """)
        try await connection.execute("VACUUM herald.deliveries_g1")
        // Then 3,000 leased at birth for five minutes, and sent.
        try await connection.execute(
            """
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, attempts, run_at, locked_by)
            SELECT n.id, dev.id, 'android_data', 'queued', 1, now() + interval '5 minutes', 'w'
            FROM herald.notifications n, herald.devices dev, generate_series(1, 3000);
            UPDATE herald.deliveries SET state = 'sent', sent_at = now(), finished_at = now(), run_at = NULL
            WHERE state = 'queued';
            """)
        try await connection.execute("VACUUM herald.deliveries_g1")
        // Ten minutes on, a claim finds nothing due, having read no entry of a lease.
        let entries = try await connection.transaction { session in
            let before = try session.query(Self.tableReads("deliveries"))[0].decode(1, as: Int.self)
            let claimed = try session.query(
                "SELECT count(*) FROM herald.claim_batch(now() + interval '10 minutes', 100, 'w2', interval '5 minutes')"
            )[0].decode(0, as: Int.self)
            #expect(claimed == 0)
            return try session.query(Self.tableReads("deliveries"))[0].decode(1, as: Int.self) - before
        }
        #expect(entries < 100, "index entries a claim read after the vacuum: \(entries)")
    }

}
