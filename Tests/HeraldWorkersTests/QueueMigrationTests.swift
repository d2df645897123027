import Foundation
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldSchema
import HeraldStatus
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// Migration 010 moves a database forward with work queued the old way (ingest and dispatch
/// job rows) and loses none of it; the numbered migrations after it take the populated database
/// to the schema a new one starts from.
@Suite struct QueueMigrationTests {
    @Test func queuedWorkSurvivesTheMoveToTablesThatAreTheirOwnQueues() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version < 10 }, functionFiles: []).migrate(db)

        let emulator = try await Emulator.start()
        let accountFile = try ServiceAccountFile(try await emulator.makeServiceAccount(projectID: "shop-prod"))
        defer { accountFile.remove() }
        try await db.query(
            "INSERT INTO herald.apps (app_id, fcm_project_id, credentials_file) VALUES ('shop', 'shop-prod', $1)",
            [accountFile.path])
        try await db.execute(
            """
            SELECT herald.register_device('shop', 'd' || n, 'android', 'token-' || n, 'u' || n) FROM generate_series(1, 6) n;
            -- Four ingested (their deliveries have dispatch jobs), two still waiting for ingest.
            SELECT herald.send('shop', user_ref => 'u' || n, title => 'old ' || n) FROM generate_series(1, 4) n;
            SELECT herald.ingest(array_agg(ref)) FROM herald.jobs WHERE kind = 'ingest';
            DELETE FROM herald.jobs WHERE kind = 'ingest';
            SELECT herald.send('shop', user_ref => 'u' || n, title => 'waiting ' || n) FROM generate_series(5, 6) n;
            -- The old ingest job of one of them had died; its notification is still 'received'.
            UPDATE herald.jobs SET state = 'dead', dead_at = now(), last_error = 'boom'
            WHERE id = (SELECT min(id) FROM herald.jobs WHERE kind = 'ingest');
            -- Dispatch jobs in every state: due, backing off, leased by a live worker, dead.
            UPDATE herald.jobs j SET run_at = now() + interval '1 hour', attempts = 3
            FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id
            WHERE j.kind = 'dispatch' AND j.ref = d.id AND v.device_id = 'd2';
            UPDATE herald.jobs j SET state = 'running', attempts = 1, locked_by = 'old-host:1',
                locked_until = now() + interval '1 hour'
            FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id
            WHERE j.kind = 'dispatch' AND j.ref = d.id AND v.device_id = 'd3';
            UPDATE herald.jobs j SET state = 'dead', dead_at = now(), attempts = 25, last_error = 'lease expired'
            FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id
            WHERE j.kind = 'dispatch' AND j.ref = d.id AND v.device_id = 'd4';
            -- Other kinds are not the migration's business.
            INSERT INTO herald.jobs (kind, payload) VALUES ('sleep', '{"ms": 1}');
            """)

        try await Migrator().migrate(db)
        // The schema it moved to is the one a new database starts from (the baseline).
        let fresh = try await TestDatabase.create()
        let difference = SchemaDump.firstDifference(
            try await SchemaDump.dump(fresh.name), try await SchemaDump.dump(database.name))
        #expect(difference == nil, "the moved database differs from a new one at \(difference ?? "")")

        func deliveryOf(_ device: String) async throws -> PostgresRow {
            try await db.query(
                """
                SELECT d.state, d.attempts, d.locked_by, d.run_at > now() + interval '30 seconds', d.dead_at IS NOT NULL,
                       d.last_error
                FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = $1
                """, [device])[0]
        }
        let due = try await deliveryOf("d1")
        #expect(try due.decode(0, as: String.self) == "queued")
        #expect(try due.decode(3, as: Bool.self) == false)
        let backingOff = try await deliveryOf("d2")
        #expect(try backingOff.decode(1, as: Int.self) == 3)
        #expect(try backingOff.decode(3, as: Bool.self))
        let leased = try await deliveryOf("d3")
        #expect(try leased.decode(2, as: String?.self) == "old-host:1")
        #expect(try leased.decode(3, as: Bool.self))
        let dead = try await deliveryOf("d4")
        #expect(try dead.decode(0, as: String.self) == "failed")
        #expect(try dead.decode(4, as: Bool.self))
        #expect(try dead.decode(5, as: String?.self) == "lease expired")
        let jobs = try await db.query("SELECT kind FROM herald.jobs ORDER BY kind").map {
            try $0.decode(0, as: String.self)
        }
        #expect(jobs == ["sleep"])
        let waiting = try await db.query("SELECT count(*) FROM herald.notifications WHERE state = 'received'")
        #expect(try waiting[0].decode(0, as: Int.self) == 2)

        // The new workers carry on: everything due is ingested and sent; the leased and the
        // backing-off deliveries wait their time; the dead one waits for a redrive.
        var fcm = Senders.Configuration()
        fcm.endpoints["fcm"] = emulator.baseURL
        let context = WorkerContext(
            connection: db, clock: SystemClock(), logger: Logger(label: "test"),
            senders: Senders(http: HTTPClient(), configuration: fcm, logger: Logger(label: "test")))
        try await IngestWorker(context: context).drain()
        try await DispatchWorker(context: context).drain()
        let sent = Set(await emulator.received.map(\.target))
        let debug = try await db.query(
            "SELECT d.state, d.last_error, n.state, n.reason FROM herald.notifications n LEFT JOIN herald.deliveries d ON d.notification_id = n.id"
        ).map {
            "\(try $0.decode(0, as: String?.self) ?? "-") \(try $0.decode(1, as: String?.self) ?? "-") \(try $0.decode(2, as: String.self)) \(try $0.decode(3, as: String?.self) ?? "-")"
        }
        #expect(sent == ["token-1", "token-5", "token-6"], "\(debug)")
        #expect(try await db.query("SELECT herald.redrive(kind => 'dispatch')")[0].decode(0, as: Int.self) == 1)
        try await DispatchWorker(context: context).drain()
        #expect(Set(await emulator.received.map(\.target)) == ["token-1", "token-4", "token-5", "token-6"])
    }
}

/// Migration 011 moves each app's configuration problem to its scope, and devices keep
/// registering and sending as before.
@Suite struct WebPushMigrationTests {
    @Test func configurationProblemsMoveToTheirScope() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version < 11 }, functionFiles: []).migrate(db)
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id, config_error, config_error_at) VALUES
                ('ios-broken', 'p1', '401 THIRD_PARTY_AUTH_ERROR: Auth error from APNS', now() - interval '1 hour'),
                ('fcm-broken', 'p2', 'app fcm-broken: cannot read the service-account file', now()),
                ('fine', 'p3', NULL, NULL);
            SELECT herald.register_device('fine', 'phone', 'android', 'token-1', 'alice');
            SELECT herald.send('fine', user_ref => 'alice', title => 'queued before');
            """)
        try await Migrator().migrate(db)

        let rows = try await db.query(
            "SELECT app_id, scope, waiting, config_error_at = failed_at FROM herald.app_problems ORDER BY app_id")
        #expect(try rows.map { try $0.decode(0, as: String.self) } == ["fcm-broken", "ios-broken"])
        #expect(try rows.map { try $0.decode(1, as: String.self) } == ["fcm", "fcm_apns"])
        #expect(try rows[1].decode(2, as: String.self) == "iOS deliveries through FCM")
        #expect(try rows.allSatisfy { try $0.decode(3, as: Bool.self) })
        // The notification queued before is ingested by the new function, and the old
        // registration call still works.
        #expect(try await db.query("SELECT deliveries FROM herald.ingest_next(10)")[0].decode(0, as: Int.self) == 1)
        #expect(
            try await db.query(
                "SELECT status FROM herald.register_device('fine', 'phone', 'android', 'token-2', 'alice')")[0]
                .decode(0, as: String.self) == "registered")
    }
}

/// A database migrated before migration 000 existed (the migrator then made
/// `herald.schema_migrations` itself) moves to 013 and 014 with its work in it: nothing is
/// lost, a retry that can no longer be sent is ended by the retry worker, and retention still
/// removes a notification's deliveries now that no key cascades to them.
@Suite struct RetryWorkerMigrationTests {
    @Test func aDatabaseFrom012MovesForwardWithItsWork() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version <= 12 }, functionFiles: []).migrate(db)
        try await db.execute(
            """
            DELETE FROM herald.schema_migrations WHERE version = 0;
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'shop');
            SELECT herald.register_device('shop', 'd' || n, 'android', 'token-' || n, 'u' || n)
            FROM generate_series(1, 4) AS n;
            SELECT herald.send('shop', user_ref => 'u' || n, title => 'before') FROM generate_series(1, 4) AS n;
            SELECT herald.ingest_next(10);
            -- A producer's key in what became Herald's namespace, still waiting for ingest.
            SELECT herald.send('shop', user_ref => 'u1', title => 'mine', idempotency_key => 'herald-wakeup-1');
            -- d1 waits out a backoff although its notification expired; d2 waits and is fine;
            -- d3 was sent long ago; d4 is due now.
            UPDATE herald.deliveries SET attempts = 1, run_at = now() + interval '1 hour'
            WHERE device_id IN (SELECT id FROM herald.devices WHERE device_id IN ('d1', 'd2'));
            UPDATE herald.notifications SET expires_at = now() - interval '1 second' WHERE user_ref = 'u1';
            UPDATE herald.deliveries SET state = 'sent', run_at = NULL, finished_at = now() - interval '30 days'
            WHERE device_id = (SELECT id FROM herald.devices WHERE device_id = 'd3');
            UPDATE herald.notifications SET created_at = now() - interval '30 days' WHERE user_ref = 'u3';
            """)
        let before = try await db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self)

        #expect(try await Migrator().migrate(db).versions == [0] + Migration.embedded.map(\.version).filter { $0 > 12 })
        #expect(try await db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self) == before)
        // Migration 015: the app stays open to every producer, and status says so; the waiting
        // notification whose key is now Herald's is rejected with the reason, not left to stall ingest.
        #expect(try await StatusReport.load(db).openToEveryProducer == ["shop"])
        let herald = try await db.query(
            "SELECT state, reason FROM herald.notifications WHERE idempotency_key = 'herald-wakeup-1'")[0]
        #expect(try herald.decode(0, as: String.self) == "rejected")
        #expect(try herald.decode(1, as: String.self).contains("Herald's own"))

        let context = WorkerContext(connection: db, clock: SystemClock(), logger: Logger(label: "test"))
        _ = try await RetryWorker(context: context).runBatch(limit: 10) { false }
        func state(_ device: String) async throws -> String {
            try await db.query(
                """
                SELECT d.state FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
                WHERE dev.device_id = $1
                """, [device])[0].decode(0, as: String.self)
        }
        #expect(try await state("d1") == "expired")
        #expect(try await state("d2") == "queued")
        #expect(try await state("d4") == "queued")

        // Retiring the old tables' generation drops the finished deliveries (d1's, d3's) and keeps
        // those still queued.
        _ = try await PartitionTests.rotateAndRetire(db)
        #expect(try await db.query("SELECT count(*) FROM herald.deliveries WHERE kept")[0].decode(0, as: Int.self) == 2)
        #expect(try await db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self) == before - 2)
    }
}
