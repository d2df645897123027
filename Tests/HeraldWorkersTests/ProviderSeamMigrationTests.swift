import Foundation
import HeraldPostgres
import HeraldSchema
import HeraldTestSupport
import Testing

/// Migration 031 moves a populated database to the provider seam: each app's settings move to
/// its providers' tables and nothing else changes; the next release drops the old columns of
/// `herald.apps`.
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

    /// Release 0.11.0 (migration 045) drops what 0.10.0 kept for its upgrade: herald.apps' old
    /// columns and the triggers that kept them in step, and herald.record_sends' older signatures.
    /// Every setting stays in the providers' tables, and a change to one of them still renews the
    /// app's version, so the daemons read it again.
    @Test func theNextReleaseDropsTheOldColumnsAndKeepsEverySetting() async throws {
        let db = try await databaseAt030()
        try await Migrator(migrations: Migration.embedded.filter { $0.version <= 44 }, functionFiles: []).migrate(db)
        // As 0.10.0's function files left it: its herald.app_setups (old columns and all), which
        // its daemons prepared as `SELECT *` and keep prepared while 0.11.0 migrates, and the
        // six-argument herald.record_sends of the builds before migration 36.
        try await db.execute(Self.release010Functions)
        let daemon010 = try await PostgresConnection.connect(db.conninfo)
        let before = try await daemon010.query("SELECT * FROM herald.app_setups($1)", [["shop"]])
        #expect(try before[0].decode("app_id", as: String.self) == "shop")
        try await Migrator().migrate(db)
        // The prepared statement still works: the result type did not change.
        let after = try await daemon010.query("SELECT * FROM herald.app_setups($1)", [["shop"]])
        #expect(try after[0].decode("provider_settings", as: String.self).contains(#""project_id": "shop-prod""#))

        let columns = try await db.query(
            """
            SELECT column_name FROM information_schema.columns
            WHERE table_schema = 'herald' AND table_name = 'apps' ORDER BY column_name
            """)
        #expect(
            try columns.map { try $0.decode(0, as: String.self) } == [
                "app_id", "created_at", "default_message_class", "default_priority", "default_ttl", "ios_transport",
                "settings_changed_at",
            ])
        let recordSends = try await db.query(
            "SELECT count(*) FROM pg_proc WHERE proname = 'record_sends' AND pronamespace = 'herald'::regnamespace")
        #expect(try recordSends[0].decode(0, as: Int.self) == 1)
        #expect(
            try await row(db, "SELECT bundle_id, key_file FROM herald.app_apns WHERE app_id = 'shop'")
                == ["com.example.shop", "/etc/herald/apns.p8"])
        let setups = try await db.query("SELECT app_id, provider_settings::text FROM herald.app_setups('{shop}')")
        #expect(try setups[0].decode(1, as: String.self).contains(#""project_id": "shop-prod""#))
        for (table, change) in [
            ("app_fcm", "credentials_file = '/etc/herald/rotated.json'"), ("app_apns", "key_id = 'KEY7654321'"),
            ("app_webpush", "vapid_subject = 'mailto:a@b.example'"),
        ] {
            let version = try await row(db, "SELECT xmin::text FROM herald.apps WHERE app_id = 'shop'")
            try await db.query("UPDATE herald.\(table) SET \(change) WHERE app_id = 'shop'")
            #expect(
                try await row(db, "SELECT xmin::text FROM herald.apps WHERE app_id = 'shop'") != version,
                "a change to \(table) renews the app's version")
        }
        // A script written for the old columns fails, naming the column.
        let refused = await #expect(throws: PostgresError.self) {
            try await db.query("UPDATE herald.apps SET apns_bundle_id = 'com.example.shop2' WHERE app_id = 'shop'")
        }
        #expect(refused?.sqlState == "42703", "\(String(describing: refused))")
    }

    /// 0.10.0's text of the functions migration 045 replaces or drops (functions/dispatch.sql at
    /// 44ccc79), shortened where it does not matter here.
    static let release010Functions = """
        CREATE FUNCTION herald.app_setups(apps text[]) RETURNS TABLE (app_id text, app_version text,
            fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text, web_push_hosts text[],
            web_push_private_addresses boolean, apns_environment text, apns_bundle_id text, apns_team_id text,
            apns_key_id text, apns_key_file text, apns_certificate_file text, provider_settings jsonb)
        LANGUAGE plpgsql STABLE AS $$
        BEGIN
            RETURN QUERY
            SELECT a.app_id, a.xmin::text, a.fcm_project_id, a.credentials_file, a.vapid_key_file, a.vapid_subject,
                   coalesce(a.web_push_hosts, herald.default_web_push_hosts()), a.web_push_private_addresses,
                   a.apns_environment, a.apns_bundle_id, a.apns_team_id, a.apns_key_id, a.apns_key_file,
                   a.apns_certificate_file, '{}'::jsonb
            FROM herald.apps a WHERE a.app_id = ANY(apps);
        END;
        $$;
        CREATE FUNCTION herald.record_sends(outcomes herald.send_outcome[], worker text, at timestamptz,
            dead_devices herald.dead_token[], ended_activity_tokens herald.dead_token[], problems herald.config_problem[])
        RETURNS TABLE (ended text, id bigint, token_hint text, reason text)
        LANGUAGE sql AS $$ SELECT NULL::text, NULL::bigint, NULL::text, NULL::text WHERE false $$;
        """
}
