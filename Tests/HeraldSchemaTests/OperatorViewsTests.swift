import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct OperatorViewsTests {
    func setUp() async throws -> (TestDatabase, PostgresConnection) {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'shop-prod');
            SELECT herald.register_device('shop', 'pixel', 'android', 'secret-token-pixel-0123456789', 'alice');
            SELECT herald.register_device('shop', 'iphone', 'ios', 'secret-token-iphone-0123456789', 'alice');
            SELECT herald.send('shop', user_ref => 'alice', title => 'Hi', idempotency_key => 'k-1');
            SELECT herald.ingest(array_agg(id)) FROM herald.notifications WHERE state = 'received';
            SELECT herald.unregister_device('shop', 'iphone');
            """)
        return (database, db)
    }

    @Test func journeyAndDisabledDevicesAnswerWithoutRawTokens() async throws {
        let (_, db) = try await setUp()
        let journey = try await db.query(
            """
            SELECT device_id, delivery_state, token_hint, notification_state FROM herald.notification_journey
            WHERE app_id = 'shop' AND idempotency_key = 'k-1' ORDER BY device_id
            """)
        #expect(journey.count == 2)
        #expect(try journey[0].decode(0, as: String.self) == "iphone")
        #expect(try journey[0].decode(2, as: String.self) == "secret-t…")
        #expect(try journey[1].decode(1, as: String.self) == "queued")
        #expect(try journey[1].decode(3, as: String.self) == "accepted")
        let disabled = try await db.query("SELECT device_id, disabled_cause, token_hint FROM herald.disabled_devices")
        #expect(disabled.count == 1)
        #expect(try disabled[0].decode(1, as: String.self) == "logout")
        let everything = try await db.query(
            "SELECT row_to_json(j)::text FROM herald.notification_journey j UNION ALL SELECT row_to_json(d)::text FROM herald.disabled_devices d"
        )
        #expect(try everything.allSatisfy { !(try $0.decode(0, as: String.self)).contains("0123456789") })
    }

    @Test func throughputCountsFinishedDeliveriesPerMinute() async throws {
        let (_, db) = try await setUp()
        try await db.execute("UPDATE herald.deliveries SET state = 'sent', sent_at = now(), finished_at = now()")
        let row = try await db.query("SELECT sent, failed FROM herald.throughput")[0]
        #expect(try row.decode(0, as: Int.self) == 2)
        #expect(try row.decode(1, as: Int.self) == 0)
    }

    @Test func redriveBringsDeadJobsBackExactlyOnceAndIsRecorded() async throws {
        let (_, db) = try await setUp()
        try await db.execute(
            """
            INSERT INTO herald.jobs (kind, state, dead_at, last_error, attempts)
            SELECT 'reconcile', 'dead', now(), 'FCM outage', 25 FROM generate_series(1, 2)
            """)
        let dead = try await db.query("SELECT array_agg(id ORDER BY id) FROM herald.dead_jobs")[0].decode(
            0, as: [Int64].self)
        #expect(dead.count == 2)
        #expect(
            try await db.query("SELECT herald.redrive(job_ids => $1::bigint[], note => 'test')", [dead])[0].decode(
                0, as: Int.self) == 2)
        #expect(
            try await db.query("SELECT herald.redrive(job_ids => $1::bigint[])", [dead])[0].decode(0, as: Int.self) == 0
        )
        let jobs = try await db.query(
            "SELECT state, attempts, last_error FROM herald.jobs WHERE id = ANY($1::bigint[])", [dead])
        #expect(try jobs.allSatisfy { try $0.decode(0, as: String.self) == "ready" && $0.decode(1, as: Int.self) == 0 })
        #expect(try jobs[0].decode(2, as: String.self) == "redriven after: FCM outage")
        let log = try await db.query("SELECT job_ids, note FROM herald.redrives")
        #expect(log.count == 1)
        #expect(try log[0].decode(0, as: [Int64].self) == dead)
        let error = await #expect(throws: PostgresError.self) { _ = try await db.query("SELECT herald.redrive()") }
        #expect(error?.message.contains("name the jobs") == true)
    }

    /// A delivery that ran out of attempts is dead: listed with the dead jobs under kind
    /// `dispatch` (its id in `ref`), counted by `herald.queue_depth`, and brought back by
    /// `herald.redrive`, by id or by kind.
    @Test func deadDeliveriesAreListedCountedAndRedriven() async throws {
        let (_, db) = try await setUp()
        try await db.execute(
            """
            UPDATE herald.deliveries SET state = 'failed', dead_at = now(), finished_at = now(), run_at = NULL,
                last_error = 'gave up after 25 attempts: 503 UNAVAILABLE', attempts = 25
            """)
        let dead = try await db.query(
            "SELECT ref FROM herald.dead_jobs WHERE kind = 'dispatch' AND id IS NULL ORDER BY ref"
        ).map { try $0.decode(0, as: Int64.self) }
        #expect(dead.count == 2)
        let depth = try await db.query("SELECT dead FROM herald.queue_depth WHERE kind = 'dispatch'")
        #expect(try depth[0].decode(0, as: Int.self) == 2)

        #expect(
            try await db.query("SELECT herald.redrive(delivery_ids => $1::bigint[])", [[dead[0]]])[0].decode(
                0, as: Int.self) == 1)
        #expect(
            try await db.query("SELECT herald.redrive(kind => 'dispatch', since => now() - interval '1 hour')")[0]
                .decode(0, as: Int.self) == 1)
        #expect(try await db.query("SELECT herald.redrive(kind => 'dispatch')")[0].decode(0, as: Int.self) == 0)
        let rows = try await db.query(
            "SELECT state, attempts, last_error, run_at <= now(), dead_at IS NULL FROM herald.deliveries ORDER BY id")
        for row in rows {
            #expect(try row.decode(0, as: String.self) == "queued")
            #expect(try row.decode(1, as: Int.self) == 0)
            #expect(try row.decode(2, as: String.self) == "redriven after: gave up after 25 attempts: 503 UNAVAILABLE")
            #expect(try row.decode(3, as: Bool.self))
            #expect(try row.decode(4, as: Bool.self))
        }
        let log = try await db.query("SELECT delivery_ids FROM herald.redrives ORDER BY id").map {
            try $0.decode(0, as: [Int64].self)
        }
        #expect(log == [[dead[0]], [dead[1]]])
    }

    @Test func operatorReadsTheViewsAndNothingElse() async throws {
        let (database, admin) = try await setUp()
        let login = "operator_\(database.name.suffix(8))"
        try await admin.execute("CREATE ROLE \(login) LOGIN IN ROLE herald_operator")
        let op = try await PostgresConnection.connect("\(database.conninfo) user=\(login)")
        for view in [
            "queue_depth", "notification_journey", "disabled_devices", "dead_jobs", "throughput", "app_problems",
            "redrives",
        ] {
            _ = try await op.query("SELECT * FROM herald.\(view)")
        }
        #expect(try await op.query("SELECT herald.redrive(kind => 'dispatch')")[0].decode(0, as: Int.self) == 0)
        // The redrive log names the operator who ran it, not the function's owner.
        try await admin.execute(
            """
            UPDATE herald.deliveries SET state = 'failed', dead_at = now(), run_at = NULL
            WHERE id = (SELECT min(id) FROM herald.deliveries)
            """)
        #expect(try await op.query("SELECT herald.redrive(kind => 'dispatch')")[0].decode(0, as: Int.self) == 1)
        let by = try await op.query("SELECT redriven_by FROM herald.redrives")[0].decode(0, as: String.self)
        #expect(by == login)
        // Operators add and configure apps.
        try await op.addApp("newapp", fcmProject: "newapp-prod")
        try await op.execute("UPDATE herald.apps SET default_priority = 'normal' WHERE app_id = 'newapp'")
        for forbidden in [
            "SELECT push_token FROM herald.devices", "SELECT * FROM herald.notifications",
            "SELECT * FROM herald.secrets",
            "SELECT * FROM herald.jobs", "SELECT herald.send('shop', topic => 't', title => 't')",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(forbidden)") { try await op.execute(forbidden) }
            #expect(error?.sqlState == "42501", "\(forbidden): \(error?.message ?? "")")
        }
    }
}
