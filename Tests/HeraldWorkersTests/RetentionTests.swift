import Foundation
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
import ServiceLifecycle
import Testing

@Suite struct RetentionTests {
    /// A step over the kept notifications reads at most a batch of them by id, however many old
    /// ones wait unfinished (a backlog): it skips them, and the pass goes on past them to the
    /// finished ones, which it deletes with their kept deliveries.
    @Test func aStepReadsOneBatchOfKeptRowsAndThePassGoesPastABacklog() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok', 'alice');
            INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'shop', 'alice', 'n' || n FROM generate_series(1, 1500) n;
            SELECT herald.ingest(array_agg(id)) FROM herald.notifications WHERE state = 'received';
            -- All old and kept (as a retired generation leaves them); the first 1,200 still queued
            -- (a backlog), the last 300 finished; 20 recent ones not kept, which this leaves alone.
            UPDATE herald.notifications SET created_at = now() - interval '8 days', kept = true;
            UPDATE herald.deliveries SET kept = true;
            UPDATE herald.deliveries SET state = 'sent', finished_at = now(), run_at = NULL
            WHERE notification_id >= (SELECT min(id) + 1200 FROM herald.notifications);
            INSERT INTO herald.notifications (app_id, user_ref, title, state) SELECT 'shop', 'alice', 'r' || n, 'rejected' FROM generate_series(1, 20) n;
            """)
        let first = try await db.query("SELECT min(id) FROM herald.notifications")[0].decode(0, as: Int64.self)
        func step(after: Int64) async throws -> (deleted: Int, lastID: Int64, done: Bool) {
            let row = try await db.query("SELECT * FROM herald.prune(interval '7 days', 1000, $1)", [after])[0]
            return (try row.decode("deleted"), try row.decode("last_id"), try row.decode("done"))
        }
        let one = try await step(after: 0)
        #expect(one.deleted == 0 && one.lastID == first + 999 && !one.done, "\(one)")
        let two = try await step(after: one.lastID)
        #expect(two.deleted == 300 && two.lastID == first + 1499 && two.done, "\(two)")
        let pruner = Pruner(connection: db, retention: .seconds(7 * 24 * 3600), logger: Logger(label: "test"))
        #expect(await pruner.pass().pruned == 0)
        let left = try await db.query(
            "SELECT count(*) FILTER (WHERE kept), count(*) FILTER (WHERE NOT kept) FROM herald.notifications")[0]
        #expect(try left.decode(0, as: Int.self) == 1200)
        #expect(try left.decode(1, as: Int.self) == 20)
        #expect(try await db.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self) == 1200)
    }

    /// SIGTERM does not wait for retention: the statement in hand is cancelled (here one held
    /// up by a lock: a generation's retirement, or the prune of the kept reports) and the pruner
    /// stops.
    @Test(arguments: ["herald.retire_generation", "herald.prune_records"])
    func gracefulShutdownCancelsThePruneInHand(held statement: String) async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let locker = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('shop', 'alice', 'n');
            """)
        // The generations the template closed are an hour old: due to retire (retention a
        // minute), or not (retention two hours), whenever the test starts.
        try await db.execute(
            "UPDATE herald.generations SET closed_at = now() - interval '1 hour' WHERE closed_at IS NOT NULL")
        // Were the cancel lost, the lock would hold the pruner for ever: the server ends the
        // locker's transaction after two minutes, so that the test fails rather than hangs.
        try await locker.execute(
            """
            SET idle_in_transaction_session_timeout = '120s';
            BEGIN; LOCK TABLE herald.delivery_reports IN ACCESS EXCLUSIVE MODE
            """)
        let pruner = Pruner(
            connection: PostgresConnection(conninfo: database.conninfo),
            retention: statement == "herald.retire_generation" ? .seconds(60) : .seconds(7200),
            logger: Logger(label: "test"))
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: pruner)], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        let waiting = """
            SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
            """
        var waits: [String] = []
        #expect(
            try await eventually(timeout: .seconds(60)) {
                waits = try await db.query(waiting).map { try $0.decode(0, as: String.self) }
                return waits.contains { $0.contains(statement) }
            }, "waiting for the lock: \(waits)")
        await group.triggerGracefulShutdown()
        try await running.value
        // The pruner stopped while the lock was still held.
        let held = try await db.query(
            """
            SELECT count(*) FROM pg_locks
            WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND relation = 'herald.delivery_reports'::regclass AND mode = 'AccessExclusiveLock' AND granted
            """)[0].decode(0, as: Int.self)
        #expect(held == 1, "the pruner stopped only once the lock was let go")
        try? await locker.execute("ROLLBACK")
    }

    @Test func anOperatorCanEnableADeviceByHand() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
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
