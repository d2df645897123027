import Foundation
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
import ServiceLifecycle
import Testing

@Suite struct RetentionTests {
    @Test func pruningRemovesOldFinishedRowsInBatchesAndLeavesTheRest() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok', 'alice');
            INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'shop', 'alice', 'n' || n FROM generate_series(1, 2500) n;
            SELECT herald.ingest(array_agg(id)) FROM herald.notifications WHERE state = 'received';
            -- 2,400 old and finished; 50 old but still queued; 50 recent and finished.
            UPDATE herald.notifications SET created_at = now() - interval '8 days' WHERE id <= 2450;
            UPDATE herald.deliveries SET state = 'sent', finished_at = now() WHERE notification_id <= 2400 OR notification_id > 2450;
            """)
        let pruner = Pruner(connection: db, retention: .seconds(7 * 24 * 3600), logger: Logger(label: "test"))
        #expect(try await pruner.pruneAll() == 2400)
        let left = try await db.query(
            "SELECT count(*), count(*) FILTER (WHERE created_at > now() - interval '1 day') FROM herald.notifications")[
                0]
        #expect(try left.decode(0, as: Int.self) == 100)
        #expect(try left.decode(1, as: Int.self) == 50)
        #expect(try await db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self) == 100)
        #expect(try await pruner.pruneAll() == 0)
    }

    /// A step reads at most a batch of notifications by id, however many old ones wait unfinished
    /// (a backlog): it skips them, and the pass goes on past them to the finished ones.
    @Test func aStepReadsOneBatchAndThePassGoesPastABacklog() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok', 'alice');
            INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'shop', 'alice', 'n' || n FROM generate_series(1, 1500) n;
            SELECT herald.ingest(array_agg(id)) FROM herald.notifications WHERE state = 'received';
            -- All old; the first 1,200 still queued (a backlog), the last 300 finished.
            UPDATE herald.notifications SET created_at = now() - interval '8 days';
            UPDATE herald.deliveries SET state = 'sent', finished_at = now() WHERE notification_id > 1200;
            """)
        func step(after: Int64) async throws -> (deleted: Int, lastID: Int64, done: Bool) {
            let row = try await db.query("SELECT * FROM herald.prune(interval '7 days', 1000, $1)", [after])[0]
            return (try row.decode("deleted"), try row.decode("last_id"), try row.decode("done"))
        }
        let first = try await step(after: 0)
        #expect(first.deleted == 0 && first.lastID == 1000 && !first.done, "\(first)")
        let second = try await step(after: first.lastID)
        #expect(second.deleted == 300 && second.lastID == 1500 && second.done, "\(second)")
        let pruner = Pruner(connection: db, retention: .seconds(7 * 24 * 3600), logger: Logger(label: "test"))
        #expect(try await pruner.pruneAll() == 0)
        #expect(try await db.query("SELECT count(*) FROM herald.notifications")[0].decode(0, as: Int.self) == 1200)
    }

    /// SIGTERM does not wait for retention: the statement in hand is cancelled (here one held
    /// up by a lock) and the pruner stops.
    @Test func gracefulShutdownCancelsThePruneInHand() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let locker = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'n');
            """)
        try await locker.execute("BEGIN; LOCK TABLE herald.delivery_reports IN ACCESS EXCLUSIVE MODE")
        let pruner = Pruner(
            connection: PostgresConnection(conninfo: database.conninfo), retention: .seconds(60),
            logger: Logger(label: "test"))
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: pruner)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        // The prune is waiting for the lock.
        #expect(
            try await eventually {
                try await db.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%herald.prune%'"
                )[0].decode(0, as: Int.self) == 1
            })
        // Were the cancel lost, the lock would hold the pruner for ever: it is let go after 15 s,
        // so that the test fails rather than hangs.
        let release = Task {
            try? await Task.sleep(for: .seconds(15))
            try? await locker.execute("ROLLBACK")
        }
        let asked = ContinuousClock.now
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(ContinuousClock.now - asked < .seconds(5))
        release.cancel()
        try await locker.execute("ROLLBACK")
    }

    @Test func anOperatorCanEnableADeviceByHand() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'a', 'android', 'tok-a', 'alice');
            SELECT herald.register_device('shop', 'b', 'android', 'tok-a', 'alice');
            UPDATE herald.devices SET disabled_at = now(), disabled_cause = 'token_invalid', disabled_reason = 'x' WHERE device_id = 'b';
            """)
        #expect(try await db.query("SELECT herald.enable_device('shop', 'b')")[0].decode(0, as: Bool.self))
        #expect(
            try await db.query("SELECT disabled_at IS NULL FROM herald.devices WHERE device_id = 'b'")[0].decode(
                0, as: Bool.self))
        #expect(
            try await db.query("SELECT herald.enable_device('shop', 'nobody')")[0].decode(0, as: Bool.self) == false)
        let error = await #expect(throws: PostgresError.self) {
            _ = try await db.query("SELECT herald.enable_device('shop', 'a')")
        }
        #expect(error?.message.contains("must register again") == true)
    }
}
