import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldSchema
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// Migrations 020 and 022 move a database with every kind of work in it to the partitioned
/// tables: the old tables become the first generation (the reports, those of every generation up
/// to the open one), attached as they are, and no row is lost or changed.
@Suite struct PartitionMigrationTests {
    /// Every row of the three tables, as text, in id order: the same before and after means no row
    /// was lost, added or changed.
    static let fingerprint = """
        SELECT (SELECT count(*) FROM herald.notifications), (SELECT count(*) FROM herald.deliveries),
               (SELECT md5(string_agg(n::text, '|' ORDER BY n.id)) FROM
                   (SELECT id, app_id, idempotency_key, user_ref, title, state, reason, send_at, created_at
                    FROM herald.notifications) n),
               (SELECT md5(string_agg(d::text, '|' ORDER BY d.id)) FROM
                   (SELECT id, notification_id, device_id, state, attempts, run_at, dead_at, last_error, sent_at
                    FROM herald.deliveries) d),
               (SELECT md5(string_agg(r::text, '|' ORDER BY r.id)) FROM
                   (SELECT id, reference, report_kind, delivery_id, device_id, reported_at, processed_at, outcome
                    FROM herald.delivery_reports) r)
        """

    @Test func aDatabaseWithEveryKindOfWorkMovesToThePartitionedTables() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version < 20 }, functionFiles: []).migrate(db)
        // Written as the tables were, so the mix does not depend on the functions of the time.
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'shop-prod');
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
            SELECT 'shop', 'd' || n, 'android', 'token-' || n, 'u' || n FROM generate_series(1, 100) n;
            -- 20,000 finished notifications with two deliveries each, sent or delivered, some with keys.
            INSERT INTO herald.notifications (app_id, user_ref, title, state, ingested_at, created_at, idempotency_key)
            SELECT 'shop', 'u' || (n % 100 + 1), 'old ' || n, 'accepted', now() - interval '2 days', now() - interval '2 days',
                   CASE WHEN n % 100 = 0 THEN 'order-' || n END
            FROM generate_series(1, 20000) n;
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, sent_at, finished_at, run_at, created_at)
            SELECT n.id, d.id, 'android_data', CASE WHEN d.id % 2 = 0 THEN 'sent' ELSE 'delivered' END,
                   n.created_at, n.created_at, NULL, n.created_at
            FROM herald.notifications n JOIN herald.devices d ON d.id IN (n.id % 100 + 1, (n.id + 1) % 100 + 1);
            -- Waiting for ingest; scheduled a month ahead; backing off for an hour; dead.
            INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'shop', 'u1', 'received ' || n FROM generate_series(1, 10) n;
            INSERT INTO herald.notifications (app_id, user_ref, title, state, ingested_at, send_at, idempotency_key)
            SELECT 'shop', 'u2', 'scheduled ' || n, 'accepted', now(), now() + interval '30 days', 'later-' || n FROM generate_series(1, 10) n;
            INSERT INTO herald.notifications (app_id, user_ref, title, state, ingested_at)
            SELECT 'shop', 'u3', 'retrying ' || n, 'accepted', now() FROM generate_series(1, 10) n;
            INSERT INTO herald.notifications (app_id, user_ref, title, state, ingested_at)
            SELECT 'shop', 'u4', 'dead ' || n, 'accepted', now() FROM generate_series(1, 10) n;
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, attempts, run_at, dead_at, last_error)
            SELECT n.id, 2, 'android_data',
                   CASE WHEN n.title LIKE 'dead%' THEN 'failed' ELSE 'queued' END,
                   CASE WHEN n.title LIKE 'scheduled%' THEN 0 ELSE 3 END,
                   CASE WHEN n.title LIKE 'scheduled%' THEN n.send_at WHEN n.title LIKE 'retrying%' THEN now() + interval '1 hour' END,
                   CASE WHEN n.title LIKE 'dead%' THEN now() END,
                   CASE WHEN n.title NOT LIKE 'scheduled%' THEN 'HTTP 503' END
            FROM herald.notifications n WHERE n.state = 'accepted' AND n.ingested_at > now() - interval '1 hour';
            -- A report on an old delivery, one not yet applied, and a wake-up naming an old
            -- notification.
            INSERT INTO herald.delivery_reports (reference, delivery_id, device_id, processed_at, outcome)
            SELECT 'ref', id, device_id, now(), 'applied' FROM herald.deliveries ORDER BY id LIMIT 1;
            INSERT INTO herald.delivery_reports (reference, delivery_id, device_id)
            SELECT 'ref-2', id, device_id FROM herald.deliveries ORDER BY id DESC LIMIT 1;
            INSERT INTO herald.wakeups (device_id, missed, notification_id, created_at, quiet_until)
            VALUES (1, 2, (SELECT min(id) FROM herald.notifications), now(), now() + interval '30 minutes');
            """)
        let before = try await db.query(Self.fingerprint)[0]

        let started = ContinuousClock.now
        try await Migrator().migrate(db)
        let took = ContinuousClock.now - started
        print("migrations 020 to 022 on 20,040 notifications and 40,040 deliveries: \(took)")

        let after = try await db.query(Self.fingerprint)[0]
        for column in 0..<5 {
            #expect(
                try before.decode(column, as: String.self) == after.decode(column, as: String.self), "column \(column)")
        }
        let old = try await Self.partitionOf(db, "SELECT min(id) FROM herald.notifications")
        #expect(old == "herald.notifications_g0")
        // Keys given before still name their notification; new rows go to the new generation.
        let keyed = try await db.query(
            "SELECT herald.send('shop', user_ref => 'u1', title => 'again', idempotency_key => 'order-100') = (SELECT id FROM herald.notifications WHERE idempotency_key = 'order-100')"
        )[0].decode(0, as: Bool.self)
        #expect(keyed)
        try await db.execute("SELECT herald.send('shop', user_ref => 'u1', title => 'new')")
        #expect(
            try await Self.partitionOf(db, "SELECT id FROM herald.notifications WHERE title = 'new'")
                == "herald.notifications_g1")

        // The old tables retire as any generation does, keeping what still waits (and the new
        // generation with them, its notification not yet ingested).
        // A new report gets an id past the old ones.
        let reports = try await db.query(
            """
            INSERT INTO herald.delivery_reports (reference, delivery_id, device_id)
            SELECT 'ref-3', id, device_id FROM herald.deliveries ORDER BY id LIMIT 1 OFFSET 1
            RETURNING id > (SELECT max(id) FROM herald.delivery_reports WHERE reference <> 'ref-3')
            """)
        #expect(try reports[0].decode(0, as: Bool.self))

        let retired = try await PartitionTests.rotateAndRetire(db)
        #expect(retired.retired == [0, 1])
        #expect(retired.notifications == 41 && retired.deliveries == 30, "\(retired)")
        // The reports not yet applied are kept; the rest went with the old table.
        let keptReports = try await db.query(
            "SELECT reference FROM herald.delivery_reports WHERE kept AND processed_at IS NULL ORDER BY reference"
        ).map { try $0.decode(0, as: String.self) }
        #expect(keptReports == ["ref-2", "ref-3"] && retired.reports == 2, "\(keptReports), \(retired)")
        #expect(try await db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(0, as: Int.self) == 2)
        let kept = try await db.query(
            "SELECT split_part(title, ' ', 1), count(*) FROM herald.notifications WHERE kept GROUP BY 1 ORDER BY 1"
        ).map { "\(try $0.decode(0, as: String.self))=\(try $0.decode(1, as: Int.self))" }
        #expect(kept == ["dead=10", "new=1", "received=10", "retrying=10", "scheduled=10"], "\(kept)")
        // What was scheduled is still claimed when its time comes, with its notification.
        let due = try await db.query(
            "SELECT count(*) FILTER (WHERE title LIKE 'scheduled%') FROM herald.claim_batch(now() + interval '31 days', 100, 'test', interval '1 minute')"
        )[0].decode(0, as: Int.self)
        #expect(due == 10)
    }

    static func partitionOf(_ db: PostgresConnection, _ id: String) async throws -> String {
        try await db.query("SELECT tableoid::regclass::text FROM herald.notifications WHERE id = (\(id))")[0].decode(
            0, as: String.self)
    }
}
