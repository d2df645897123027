import Foundation
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
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
