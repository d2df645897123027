import Foundation
import HeraldPostgres
import HeraldSchema
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// A notification's message class (`message_class`, service or marketing) is the producer's word,
/// which each phone maker's provider turns into its own fields; a notification that names none
/// takes the app's `default_message_class`, marketing unless the app says otherwise.
@Suite struct MessageClassTests {
    /// HarmonyOS: a service notification goes as the app's category, a marketing one as
    /// MARKETING; ingest writes the class each went as, and refuses one it does not know.
    @Test func harmonyOSSendsAServiceNotificationInItsCategoryAndAMarketingOneAsMarketing() async throws {
        let f = try await WorkerFixture.make()
        let harmony = HarmonyDispatchTests()
        let file = try await harmony.harmonyApp(f, category: "EXPRESS")
        _ = try await harmony.registerPhone(f, "mate-70")
        for (title, messageClass) in [("unsaid", nil), ("service", "service"), ("marketing", "marketing")] {
            try await f.db.query(
                "SELECT herald.send('shop', user_ref => 'alice', title => $1, message_class => $2)",
                [title, messageClass])
        }
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'bad', message_class => 'promo')")
        try await f.ingest()
        let written = try await f.db.query(
            "SELECT title, state, message_class, reason FROM herald.notifications ORDER BY id"
        )
        .map { row in try (0..<4).map { try row.decode($0, as: String?.self) } }
        #expect(
            written == [
                ["unsaid", "accepted", "marketing", nil], ["service", "accepted", "service", nil],
                ["marketing", "accepted", "marketing", nil],
                ["bad", "rejected", "promo", "message_class must be service or marketing, not 'promo'"],
            ])
        // The app's default decides for a notification that names none.
        try await f.db.query("UPDATE herald.apps SET default_message_class = 'service' WHERE app_id = 'shop'")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'default service')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'queued before 48')")
        try await f.ingest()
        // A notification ingested before migration 48 names no class: it takes the app's default.
        try await f.db.query("UPDATE herald.notifications SET message_class = NULL WHERE title = 'queued before 48'")
        try await f.dispatch()
        let categories = await f.emulator.harmonyReceived.map { received in
            let shown = received.payload["notification"] as? [String: Any]
            return [shown?["title"] as? String, shown?["category"] as? String]
        }
        #expect(
            Set(categories) == [
                ["unsaid", "MARKETING"], ["service", "EXPRESS"], ["marketing", "MARKETING"],
                ["default service", "EXPRESS"], ["queued before 48", "EXPRESS"],
            ])
        _ = file
    }

    /// Migration 48: a HarmonyOS app whose category was a service one (every notification went
    /// as it) keeps sending so, its notifications service ones by default; the others default
    /// to marketing.
    @Test func harmonyOSAppsKeepTheirCategoryAcrossTheMigration() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let db = try await database.connect()
        try await Migrator(migrations: Migration.embedded.filter { $0.version <= 47 }, functionFiles: []).migrate(db)
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('express'), ('promo'), ('plain');
            INSERT INTO herald.app_harmony (app_id, service_account_file, category)
            VALUES ('express', '/etc/herald/a.json', 'EXPRESS'), ('promo', '/etc/herald/b.json', 'MARKETING');
            """)
        try await Migrator().migrate(db)
        let defaults = try await db.query("SELECT app_id, default_message_class FROM herald.apps ORDER BY app_id").map {
            [try $0.decode(0, as: String.self), try $0.decode(1, as: String.self)]
        }
        #expect(defaults == [["express", "service"], ["plain", "marketing"], ["promo", "marketing"]])
    }

    /// 0.11.0's daemons claim through `herald.claim_sends`, prepared as `SELECT *`: it keeps the
    /// columns it had whatever the claim gains, so a statement they prepared before a migration
    /// still runs after it (a server-side PREPARE here, which nothing prepares again);
    /// `herald.claim_batch` has the new ones.
    @Test func release011sClaimKeepsItsColumnsAcrossAMigration() async throws {
        let f = try await WorkerFixture.make()
        let daemon011 = try await PostgresConnection.connect(f.database.conninfo)
        try await daemon011.execute(
            "PREPARE claim_011 AS SELECT * FROM herald.claim_sends(now(), 10, 'daemon-011', interval '1 minute')")
        try await daemon011.execute("EXECUTE claim_011")
        // The function files applied again, as a release's migration that changes them does.
        try await f.db.execute("DELETE FROM herald.schema_functions")
        try await Migrator().migrate(f.db)
        try await daemon011.execute("EXECUTE claim_011")
        let old = try await f.db.query("SELECT * FROM herald.claim_sends(now(), 0, 'w', interval '1 minute')")
        let new = try await f.db.query("SELECT * FROM herald.claim_batch(now(), 0, 'w', interval '1 minute')")
        #expect(old.columnNames.last == "registered_again_at")
        #expect(new.columnNames == old.columnNames + ["message_class"])
    }
}
