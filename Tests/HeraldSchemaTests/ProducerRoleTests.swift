import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct ProducerRoleTests {
    /// A database with the app `shop`, connected to as its owner and as a producer login (not
    /// through SET ROLE: herald.acts_for checks session_user) allowed to act for `shop`.
    static func shopAndItsProducer() async throws -> (TestDatabase, PostgresConnection, PostgresConnection) {
        let database = try await TestDatabase.create()
        let admin = try await database.connect()
        let login = "producer_\(database.name.suffix(8))"
        try await admin.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'shop-prod');
            CREATE ROLE \(login) LOGIN IN ROLE herald_producer;
            INSERT INTO herald.producer_apps (producer, app_id) VALUES ('\(login)', 'shop');
            """)
        return (database, admin, try await PostgresConnection.connect("\(database.conninfo) user=\(login)"))
    }

    @Test func producerEnqueuesAndRegistersButReadsOnlyItsNotificationsFate() async throws {
        let (_, admin, producer) = try await Self.shopAndItsProducer()

        let status = try await producer.query(
            "SELECT status FROM herald.register_device('shop', 'p1', 'ios', 'secret-token', 'alice')")
        #expect(try status[0].decode(0, as: String.self) == "registered")
        _ = try await producer.query("SELECT herald.send('shop', user_ref => 'alice', title => 'hi')")
        try await producer.execute(
            """
            INSERT INTO herald.notifications (app_id, topic, title, ios_interruption_level, android_proxy)
            VALUES ('shop', 'news', 'plain SQL', 'passive', 'deny')
            """)
        // Reports and fetches go through their functions, which check the reference.
        let outcome = try await producer.query("SELECT outcome FROM herald.report_delivery('forged')")[0]
        #expect(try outcome.decode(0, as: String.self) == "invalid_reference")
        await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT * FROM herald.pending_notifications('forged')")
        }
        _ = try await producer.query("SELECT herald.unregister_device('shop', 'p1')")
        #expect(
            try await admin.query("SELECT count(*) FROM herald.notifications WHERE state = 'received'")[0].decode(
                0, as: Int.self) == 2)

        for forbidden in [
            "SELECT push_token FROM herald.devices",
            "SELECT * FROM herald.notifications",
            "SELECT title FROM herald.notifications",
            "SELECT * FROM herald.producer_apps",
            "INSERT INTO herald.producer_apps (producer, app_id) VALUES ('herald_producer', 'shop')",
            "SELECT * FROM herald.jobs",
            "DELETE FROM herald.jobs",
            "UPDATE herald.devices SET disabled_at = NULL",
            "SELECT herald.ingest('{1}')",
            "SELECT * FROM herald.secrets",
            "SELECT herald.delivery_reference(1, 1)",
            "SELECT herald.reconcile('{1}', now(), '30 minutes', '1 minute')",
            "SELECT * FROM herald.delivery_reports",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(forbidden)") {
                try await producer.execute(forbidden)
            }
            #expect(error?.sqlState == "42501", "\(forbidden): \(error?.message ?? "")")
        }
    }

    /// A producer acts only for the apps an operator granted it, through the functions or a
    /// plain INSERT, and never writes Herald's own columns.
    @Test func producersActOnlyForTheirAppsAndWriteOnlyContent() async throws {
        let database = try await TestDatabase.create()
        let admin = try await database.connect()
        let login = "producer_\(database.name.suffix(8))"
        let operatorLogin = "operator_\(database.name.suffix(8))"
        try await admin.execute(
            """
            CREATE ROLE \(login) LOGIN IN ROLE herald_producer;
            CREATE ROLE \(operatorLogin) LOGIN IN ROLE herald_operator;
            """)
        // Operators add apps and grant them.
        let op = try await PostgresConnection.connect("\(database.conninfo) user=\(operatorLogin)")
        try await op.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop'), ('rival');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'shop-prod'), ('rival', 'rival-prod');
            INSERT INTO herald.producer_apps (producer, app_id) VALUES ('\(login)', 'shop');
            """)
        _ = try await admin.query("SELECT herald.register_device('rival', 'r1', 'android', 'rival-token', 'carol')")
        let producer = try await PostgresConnection.connect("\(database.conninfo) user=\(login)")

        _ = try await producer.query("SELECT herald.register_device('shop', 'p1', 'android', 'token-1', 'alice')")
        for forbidden in [
            "SELECT herald.register_device('rival', 'p2', 'android', 'token-2', 'alice')",
            "SELECT herald.register_device('rival', 'r1', 'android', 'stolen', 'mallory')",
            "SELECT herald.unregister_device('rival', 'r1')",
            "SELECT herald.send('rival', user_ref => 'carol', title => 'spoofed')",
            "SELECT herald.send('nonexistent', user_ref => 'carol', title => 'probe')",
            "INSERT INTO herald.notifications (app_id, user_ref, title) VALUES ('rival', 'carol', 'spoofed')",
            // Live Activities and channels, the same.
            "SELECT herald.register_activity_token('rival', 'r1', repeat('a', 64), 'Attrs')",
            "SELECT herald.unregister_activity_token('rival', 'r1', attributes_type => 'Attrs')",
            "SELECT herald.start_activity('rival', 'a', 'Attrs', '{}', '{}', 'T', user_ref => 'carol')",
            "SELECT herald.update_activity('rival', 'a', '{}')",
            "SELECT herald.end_activity('rival', 'a')",
            "SELECT herald.activity_sends('rival', 'a')",
            "SELECT herald.create_channel('rival', 'c')",
            "SELECT herald.delete_channel('rival', 'c')",
            "SELECT herald.channels('rival')",
            "SELECT herald.broadcast_activity('rival', 'c', '{}')",
            "INSERT INTO herald.notifications (app_id, activity_id, activity_event) VALUES ('shop', 'a', 'update')",
            "SELECT * FROM herald.live_activities",
            "SELECT * FROM herald.broadcast_channels",
            // Herald's own columns.
            "INSERT INTO herald.notifications (app_id, user_ref, title, state) VALUES ('shop', 'alice', 'x', 'accepted')",
            "INSERT INTO herald.notifications (app_id, user_ref, title, origin) VALUES ('shop', 'alice', 'x', 'wakeup')",
            "INSERT INTO herald.notifications (app_id, user_ref, title, reason) VALUES ('shop', 'alice', 'x', 'forged')",
            "INSERT INTO herald.notifications (app_id, user_ref, title, created_at) VALUES ('shop', 'alice', 'x', '2000-01-01')",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(forbidden)") {
                try await producer.execute(forbidden)
            }
            #expect(error?.sqlState == "42501", "\(forbidden): \(error?.message ?? "")")
        }
        // Herald's own idempotency keys, by a plain INSERT too.
        let reserved = await #expect(throws: PostgresError.self) {
            try await producer.execute(
                "INSERT INTO herald.notifications (app_id, user_ref, title, idempotency_key) VALUES ('shop', 'alice', 'x', 'herald-wakeup-9')"
            )
        }
        #expect(reserved?.sqlState == "23514", "\(reserved?.message ?? "")")
        // The rival's device is untouched.
        let rival = try await admin.query(
            "SELECT push_token, disabled_at IS NULL FROM herald.devices WHERE device_id = 'r1'")[0]
        #expect(try rival.decode(0, as: String.self) == "rival-token")
        #expect(try rival.decode(1, as: Bool.self))

        // The plain-SQL path the producers' guide gives works for its own app, and reads back
        // only its own rows.
        let insert = """
            INSERT INTO herald.notifications (app_id, user_ref, title, idempotency_key)
            VALUES ('shop', 'alice', 'plain', 'order-1') RETURNING id
            """
        let first = try await producer.query(insert)
        #expect(first.count == 1)
        #expect(try await producer.query(insert).count == 0)
        _ = try await admin.query("SELECT herald.send('rival', user_ref => 'carol', title => 'theirs')")
        let visible = try await producer.query("SELECT app_id, state FROM herald.notifications")
        #expect(try visible.map { try $0.decode(0, as: String.self) } == ["shop"])
        // Not around row-level security through a partition: the old table (generation 0), a
        // new generation's, the kept one.
        for partition in ["notifications_g0", "notifications_g1", "notifications_kept", "deliveries_g0"] {
            let denied = await #expect(throws: PostgresError.self) {
                try await producer.query("SELECT count(*) FROM herald.\(partition)")
            }
            #expect(denied?.sqlState == "42501", "\(partition): \(denied?.message ?? "")")
        }

        // Reports and fetches with another app's reference say what a forged one says.
        try await admin.execute("SELECT * FROM herald.ingest_next(10)")
        let rivalDelivery = try await admin.query(
            """
            SELECT herald.delivery_reference(d.id, d.device_id) FROM herald.deliveries d
            JOIN herald.devices dev ON dev.id = d.device_id WHERE dev.device_id = 'r1'
            """)[0].decode(0, as: String.self)
        let outcome = try await producer.query("SELECT outcome FROM herald.report_delivery($1)", [rivalDelivery])[0]
        #expect(try outcome.decode(0, as: String.self) == "invalid_reference")
        await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT * FROM herald.pending_notifications($1)", [rivalDelivery])
        }
    }

    /// A producer cannot advance the notifications' id sequence (issue #40: drawing 1.9 million
    /// ids a second outran the partitions made ahead and stopped every app's INSERT), yet its
    /// INSERT and herald.send still number their rows. Should the sequence pass the generations
    /// made ahead anyway, the next open_generation makes partitions ahead of it.
    @Test func aProducerCannotBurnTheNotificationIDs() async throws {
        let (_, admin, producer) = try await Self.shopAndItsProducer()
        for burn in [
            "SELECT nextval('herald.notifications_id_seq') FROM generate_series(1, 1000)",
            "SELECT setval('herald.notifications_id_seq', 1)",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(burn)") { try await producer.query(burn) }
            #expect(error?.sqlState == "42501", "\(burn): \(error?.message ?? "")")
        }
        let inserted = try await producer.query(
            "INSERT INTO herald.notifications (app_id, topic, title) VALUES ('shop', 'news', 'plain SQL') RETURNING id")[
                0
            ]
            .decode(0, as: Int64.self)
        let sent = try await producer.query("SELECT herald.send('shop', user_ref => 'alice', title => 'hi')")[0]
            .decode(0, as: Int64.self)
        #expect(sent == inserted + 1)

        // The sequence jumps into the last generation made ahead (only the daemon could do it now).
        let last = try await admin.query("SELECT max(generation) FROM herald.generations")[0].decode(0, as: Int.self)
        try await admin.query("SELECT setval('herald.notifications_id_seq', ($1::bigint << 32) + 5)", [last])
        _ = try await admin.query("SELECT herald.open_generation(interval '1 day')")
        let ahead = try await admin.query(
            "SELECT count(*) FROM herald.generations WHERE generation > $1", [last])[0].decode(0, as: Int.self)
        #expect(ahead >= 2, "partitions are made ahead of where the sequence is")
        _ = try await producer.query("SELECT herald.send('shop', user_ref => 'alice', title => 'still in')")
    }
}
