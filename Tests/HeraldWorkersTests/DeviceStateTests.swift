import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
import Synchronization
import Testing

/// What a backend learns about its devices (`herald.device_states`, `herald.changed_devices`,
/// the app's own NOTIFY channel), through a real producer login, against a real database and the
/// emulator.
@Suite struct DeviceStateTests {
    typealias Change = (change: String, device: String, reason: String?, hint: String?)

    func changes(_ producer: PostgresConnection, after: String? = nil) async throws -> [Change] {
        try await producer.query(
            "SELECT change, device_id, reason, token_hint FROM herald.changed_devices('shop', $1)", [after]
        ).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2), try $0.decode(3)) }
    }

    func lastCursor(_ producer: PostgresConnection, after: String? = nil) async throws -> String? {
        try await producer.query("SELECT cursor FROM herald.changed_devices('shop', $1)", [after]).last?.decode(
            0, as: String.self)
    }

    @Test func aBackendSeesWhatBecameOfItsDevicesWithoutTheirTokens() async throws {
        let f = try await WorkerFixture.make()
        let producer = try await f.producer()
        let inbox = Mutex<[PostgresNotification]>([])
        let channel = try await producer.query("SELECT herald.device_changes_channel('shop')")[0].decode(
            0, as: String.self)
        let listener = PostgresListener(
            conninfo: f.database.conninfo, channels: [channel], logger: Logger(label: "test"),
            onNotification: { message in inbox.withLock { $0.append(message) } }, onReconnect: {})
        listener.start()
        defer { listener.stop() }

        for device in ["pixel", "tablet", "old-phone"] { try await f.register(device, "android") }
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'hi')")
        await f.emulator.setBehaviour(.unregistered, forToken: "token-tablet")
        try await f.ingest()
        try await f.dispatch()
        let reference = try #require(
            await f.message(to: "token-pixel").flatMap { $0["data"] as? [String: String] }?["herald_report"])
        _ = try await f.db.query("SELECT herald.report_delivery($1)", [reference])
        try await f.reconcile()
        // A new phone takes the old one's token; the pixel logs out, then comes back.
        _ = try await producer.query(
            "SELECT herald.register_device('shop', 'new-phone', 'android', 'token-old-phone', 'alice')")
        _ = try await producer.query("SELECT herald.unregister_device('shop', 'pixel')")
        _ = try await producer.query(
            "SELECT herald.register_device('shop', 'pixel', 'android', 'token-pixel', 'alice')")

        // Once every older writing transaction of the cluster has ended (other tests' too: under
        // load, more than 20 s once).
        #expect(await eventually(timeout: .seconds(120)) { (try? await changes(producer).count) == 4 })
        let feed = try await changes(producer)
        #expect(feed.map(\.change) == ["token_invalid", "token_moved", "logged_out", "enabled"])
        #expect(feed.map(\.device) == ["tablet", "old-phone", "pixel", "pixel"])
        #expect(feed[0].reason?.contains("UNREGISTERED") == true, "the provider's error: \(feed[0].reason ?? "")")
        #expect(feed[1].reason?.contains("new-phone") == true)
        #expect(feed.map(\.hint) == ["token-ta…", "token-ol…", "token-pi…", "token-pi…"], "a hint, never the token")
        #expect(await eventually(timeout: .seconds(10)) { !inbox.withLock { $0 }.isEmpty })
        #expect(inbox.withLock { $0 }.allSatisfy { $0.payload == "shop" })

        // Page by page: past the last cursor, nothing.
        let cursors = try await producer.query("SELECT cursor FROM herald.changed_devices('shop', NULL, 2)").map {
            try $0.decode(0, as: String.self)
        }
        #expect(cursors.count == 2)
        #expect(try await changes(producer, after: cursors[1]).map(\.change) == ["logged_out", "enabled"])

        let states = try await producer.query(
            """
            SELECT device_id, enabled, disabled_cause, unreported > 0, last_reported_at IS NOT NULL, token_hint
            FROM herald.device_states('shop', user_refs => '{alice}')
            """
        ).map {
            (
                try $0.decode(0, as: String.self), try $0.decode(1, as: Bool.self), try $0.decode(2, as: String?.self),
                try $0.decode(3, as: Bool.self), try $0.decode(4, as: Bool.self), try $0.decode(5, as: String?.self)
            )
        }
        #expect(states.map(\.0) == ["new-phone", "old-phone", "pixel", "tablet"])
        #expect(states.map(\.1) == [true, false, true, false])
        #expect(states.map(\.2) == [nil, "token_moved", nil, "token_invalid"])
        #expect(states.map(\.3) == [false, true, false, false], "sent and unreported: the old phone's")
        #expect(states.map(\.4) == [false, false, true, false], "reported: the pixel")
        #expect(states.map(\.5) == ["token-ol…", nil, "token-pi…", "token-ta…"], "a hint, never the token")

        // Another app's devices are not the producer's to read.
        try await f.db.addApp("other", fcmProject: "other-prod")
        await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT * FROM herald.changed_devices('other')")
        }
        await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT * FROM herald.device_states('other')")
        }
    }

    /// A change whose transaction commits after a later one's is not passed by the cursor: the
    /// feed holds a change back while an older transaction runs, and orders changes by their
    /// transactions, not by when each row was made.
    @Test func aCursorNeverPassesAChangeThatCommitsLate() async throws {
        let f = try await WorkerFixture.make()
        let producer = try await f.producer()
        for device in ["a", "b", "c", "d"] { try await f.register(device, "android") }
        let slow = try await f.database.connect()
        try await slow.execute("BEGIN; SELECT herald.unregister_device('shop', 'a');")
        _ = try await f.db.query("SELECT herald.unregister_device('shop', 'b')")
        #expect(try await changes(producer).isEmpty, "b waits for a's transaction to end")
        try await slow.execute("COMMIT")
        // Once every older transaction of the cluster has ended (other tests' too, here: beside
        // the heavy tests, a minute and more).
        #expect(
            await eventually(timeout: .seconds(120)) {
                (try? await changes(producer).map(\.device)) == ["a", "b"]
            })
        let seen = try await lastCursor(producer)

        // An older transaction (its id taken first) writes its change after a younger one wrote
        // its own: the younger one's row is made first, yet comes after in the feed.
        let older = try await f.database.connect()
        let younger = try await f.database.connect()
        try await older.execute("BEGIN; SELECT pg_current_xact_id();")
        try await younger.execute("BEGIN; SELECT herald.unregister_device('shop', 'c');")
        try await older.execute("SELECT herald.unregister_device('shop', 'd'); COMMIT;")
        #expect(
            await eventually(timeout: .seconds(120)) {
                (try? await changes(producer, after: seen).map(\.device)) == ["d"]
            })
        let afterD = try await lastCursor(producer, after: seen)
        try await younger.execute("COMMIT")
        #expect(
            await eventually(timeout: .seconds(120)) {
                (try? await changes(producer, after: afterD).map(\.device)) == ["c"]
            })
    }
}
