import Foundation
import HeraldPostgres
import HeraldSchema
import HeraldTestSupport
import Testing

/// Migration 031 moves a populated database to the provider seam: each app's settings move to
/// its providers' tables, nothing else changes, and for a release the old columns of
/// `herald.apps` stay in step with the new tables both ways.
@Suite struct ProviderSeamMigrationTests {
    /// A database as 030 left it, with an app of every kind of setting, devices of every token
    /// kind, a configuration problem and a saturated route.
    func databaseAt030() async throws -> PostgresConnection {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version <= 30 }, functionFiles: []).migrate(db)
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id, credentials_file, vapid_key_file, vapid_subject,
                                     web_push_hosts, web_push_private_addresses, ios_transport, apns_environment,
                                     apns_bundle_id, apns_team_id, apns_key_id, apns_key_file)
            VALUES ('shop', 'shop-prod', '/etc/herald/shop.json', '/etc/herald/vapid.pem', 'mailto:ops@shop.example',
                    '{push.example}', true, 'apns', 'development', 'com.example.shop', 'TEAM123456', 'KEY1234567',
                    '/etc/herald/apns.p8'),
                   ('plain', 'plain-prod', NULL, NULL, NULL, NULL, false, 'fcm', 'production', NULL, NULL, NULL, NULL);
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, token_kind)
            VALUES ('shop', 'pixel', 'android', 'token-pixel', 'registration_token'),
                   ('shop', 'fid', 'android', 'token-fid', 'installation_id'),
                   ('shop', 'iphone', 'ios', repeat('ab', 32), 'apns_device_token'),
                   ('shop', 'browser', 'web', 'https://push.example/1', 'web_subscription');
            INSERT INTO herald.app_config_problems (app_id, scope, problem, since, failed_at)
            VALUES ('shop', 'fcm_apns', '401 THIRD_PARTY_AUTH_ERROR', now(), now());
            INSERT INTO herald.route_saturation (app_id, route, origin, worker, since, seen_at, in_flight, postponed)
            VALUES ('shop', 'web', 'https://push.example', 'w', now(), now(), 500, 12);
            """)
        return db
    }

    func row(_ db: PostgresConnection, _ sql: String) async throws -> [String?] {
        let rows = try await db.query(sql)
        try #require(rows.count == 1, "\(sql): \(rows.count) rows")
        return try (0..<rows.columnCount).map { try rows[0].decode($0, as: String?.self) }
    }

    @Test func aPopulatedDatabaseMovesToTheProvidersTablesAndKeepsEverythingElse() async throws {
        let db = try await databaseAt030()
        try await Migrator().migrate(db)

        #expect(
            try await row(db, "SELECT project_id, credentials_file FROM herald.app_fcm WHERE app_id = 'shop'")
                == ["shop-prod", "/etc/herald/shop.json"])
        #expect(
            try await row(db, "SELECT project_id, credentials_file FROM herald.app_fcm WHERE app_id = 'plain'")
                == ["plain-prod", nil])
        #expect(
            try await row(
                db,
                "SELECT environment, bundle_id, team_id, key_id, key_file, certificate_file FROM herald.app_apns")
                == ["development", "com.example.shop", "TEAM123456", "KEY1234567", "/etc/herald/apns.p8", nil])
        #expect(
            try await row(
                db,
                "SELECT vapid_key_file, vapid_subject, hosts::text, private_addresses::text FROM herald.app_webpush")
                == ["/etc/herald/vapid.pem", "mailto:ops@shop.example", "{push.example}", "true"])
        // Nothing else moved: the devices, the problem, the saturated route.
        #expect(try await db.query("SELECT 1 FROM herald.devices").count == 4)
        #expect(try await row(db, "SELECT scope FROM herald.app_problems") == ["fcm_apns"])
        #expect(try await row(db, "SELECT postponed::text FROM herald.route_saturation") == ["12"])
    }

    @Test func theOldColumnsAndTheProvidersTablesStayInStepForARelease() async throws {
        let db = try await databaseAt030()
        try await Migrator().migrate(db)

        // An operator's script written for the old columns still works.
        try await db.query("UPDATE herald.apps SET apns_bundle_id = 'com.example.shop2' WHERE app_id = 'shop'")
        #expect(try await row(db, "SELECT bundle_id FROM herald.app_apns") == ["com.example.shop2"])
        try await db.query(
            "UPDATE herald.apps SET vapid_key_file = '/etc/herald/vapid2.pem', vapid_subject = 'mailto:a@b.example' WHERE app_id = 'plain'"
        )
        #expect(
            try await row(db, "SELECT vapid_key_file, hosts::text FROM herald.app_webpush WHERE app_id = 'plain'")
                == ["/etc/herald/vapid2.pem", nil])
        try await db.query("INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('new-old-way', 'p')")
        #expect(try await row(db, "SELECT project_id FROM herald.app_fcm WHERE app_id = 'new-old-way'") == ["p"])
        #expect(try await db.query("SELECT 1 FROM herald.app_apns WHERE app_id = 'new-old-way'").isEmpty)

        // What operators write now is seen in the old columns too, and renews the app's version.
        let version = try await row(db, "SELECT xmin::text FROM herald.apps WHERE app_id = 'shop'")
        try await db.query(
            "UPDATE herald.app_fcm SET credentials_file = '/etc/herald/rotated.json' WHERE app_id = 'shop'")
        #expect(
            try await row(db, "SELECT credentials_file FROM herald.apps WHERE app_id = 'shop'")
                == ["/etc/herald/rotated.json"])
        #expect(try await row(db, "SELECT xmin::text FROM herald.apps WHERE app_id = 'shop'") != version)
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('new-way');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('new-way', 'new-prod');
            INSERT INTO herald.app_apns (app_id, bundle_id, certificate_file) VALUES ('new-way', 'com.new', '/c.pem');
            UPDATE herald.apps SET ios_transport = 'apns' WHERE app_id = 'new-way';
            """)
        #expect(
            try await row(db, "SELECT fcm_project_id, apns_bundle_id FROM herald.apps WHERE app_id = 'new-way'")
                == ["new-prod", "com.new"])
        // The old CHECK still guards direct APNs: its settings cannot go while the app sends there.
        let refused = await #expect(throws: PostgresError.self) {
            try await db.query("DELETE FROM herald.app_apns WHERE app_id = 'new-way'")
        }
        #expect(refused?.sqlState == "23514", "\(String(describing: refused))")
        #expect(refused?.message.contains("direct APNs needs a bundle id") == true, "\(String(describing: refused))")
        try await db.query("DELETE FROM herald.app_webpush WHERE app_id = 'shop'")
        #expect(
            try await row(
                db, "SELECT vapid_key_file, web_push_private_addresses::text FROM herald.apps WHERE app_id = 'shop'")
                == [nil, "false"])
    }

    /// During an upgrade, older releases' daemons still record through their signatures: the
    /// twenty arrays, through the six-argument form (without push type tokens), through today's.
    @Test func thePreviousReleasesRecordStillRecords() async throws {
        let db = try await TestDatabase.create().connect()
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'shop-prod');
            SELECT herald.register_device('shop', 'pixel', 'android', 'token-pixel', 'alice');
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped');
            SELECT herald.ingest_next(10);
            """)
        try await db.query(
            """
            SELECT herald.record_sends(ARRAY(SELECT id FROM herald.deliveries), '{sent}', '{projects/p/messages/1}',
                                       '{NULL}', ARRAY[extract(epoch FROM now())::float8], '{NULL}', '{false}',
                                       '{false}', 'old-daemon', '{}', '{}', '{}', now(), '{}', '{}', '{}', '{NULL}',
                                       '{}', '{}', '{}')
            """)
        #expect(
            try await row(db, "SELECT state, provider_message_id FROM herald.deliveries")
                == ["sent", "projects/p/messages/1"])
    }
}
