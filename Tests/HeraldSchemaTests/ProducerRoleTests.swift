import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite struct ProducerRoleTests {
    @Test func producerCanEnqueueAndRegisterButReadsNothing() async throws {
        let database = try await TestDatabase.create()
        let admin = try await database.connect()
        let login = "producer_\(database.name.suffix(8))"
        try await admin.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'shop-prod');
            CREATE ROLE \(login) LOGIN IN ROLE herald_producer;
            """)
        let producer = try await PostgresConnection.connect("\(database.conninfo) user=\(login)")

        let status = try await producer.query(
            "SELECT status FROM herald.register_device('shop', 'p1', 'ios', 'secret-token', 'alice')")
        #expect(try status[0].decode(0, as: String.self) == "registered")
        _ = try await producer.query("SELECT herald.send('shop', user_ref => 'alice', title => 'hi')")
        try await producer.execute(
            "INSERT INTO herald.notifications (app_id, topic, title) VALUES ('shop', 'news', 'plain SQL')")
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
            "SELECT * FROM herald.jobs",
            "DELETE FROM herald.jobs",
            "UPDATE herald.devices SET disabled_at = NULL",
            "SELECT herald.ingest('{1}')",
            "SELECT * FROM herald.secrets",
            "SELECT herald.delivery_reference(1, 1)",
            "SELECT herald.reconcile('{1}')",
            "SELECT * FROM herald.delivery_reports",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(forbidden)") {
                try await producer.execute(forbidden)
            }
            #expect(error?.sqlState == "42501", "\(forbidden): \(error?.message ?? "")")
        }
    }
}
