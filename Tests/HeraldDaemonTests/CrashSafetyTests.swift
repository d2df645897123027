import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Real crashes, of the daemon and of PostgreSQL, while notifications flow. Nothing may be
/// lost, and duplicates must stay within the in-flight window.
@Suite struct CrashSafetyTests {
    @Test func killingTheDaemonMidSendLosesNothing() async throws {
        let count = 3000
        let batch = 100
        let concurrency = 2
        let emulator = try await FCMEmulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "crash")
        let accountFile = try ServiceAccountFile(account)
        defer { accountFile.remove() }
        let file = accountFile.path
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.query(
            "INSERT INTO herald.apps (app_id, fcm_project_id, credentials_file) VALUES ('crash', 'crash', $1)", [file])
        try await db.query(
            """
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
            SELECT 'crash', 'd' || n, 'android', 'token-' || n, 'u' || n FROM generate_series(1, $1) n
            """, [count])
        try await db.query(
            "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'crash', 'u' || n, 'hi' FROM generate_series(1, $1) n",
            [count])

        let environment = [
            "HERALD_DATABASE_URL": database.conninfo, "HERALD_WORKERS": "all", "HERALD_FCM_ENDPOINT": emulator.baseURL,
            "HERALD_BATCH_SIZE": "\(batch)", "HERALD_CONCURRENCY": "\(concurrency)", "HERALD_LEASE": "2s",
            "HERALD_RESCUE_INTERVAL": "200ms", "HERALD_POLL_INTERVAL": "200ms",
        ]
        func sent() async throws -> Int {
            try await db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")[0].decode(0, as: Int.self)
        }
        var kills = 0
        for round in 0..<4 {
            let daemon = try HeraldProcess(["run"], environment: environment)
            // Kill it once it is sending, at a different moment each round.
            let before = try await sent()
            _ = try await eventually(timeout: .seconds(20), every: .milliseconds(5)) {
                try await sent() > before + 100 + round * 150
            }
            try await Task.sleep(for: .milliseconds(Int64.random(in: 0...40)))
            daemon.send(SIGKILL)
            #expect(await daemon.waitForExit(timeout: .seconds(10)))
            kills += 1
            if try await sent() == count { break }
        }

        let survivor = try HeraldProcess(["run"], environment: environment)
        let finished = try await eventually(timeout: .seconds(60)) {
            try await db.query(
                """
                SELECT (SELECT count(*) FROM herald.notifications WHERE state = 'received')
                     + (SELECT count(*) FROM herald.deliveries WHERE state = 'queued')
                """)[0].decode(0, as: Int.self) == 0
        }
        #expect(finished, "\(survivor.output.suffix(2000))")
        survivor.send(SIGTERM)
        #expect(await survivor.waitForExit(timeout: .seconds(10)))

        // Nothing lost: every notification accepted, every delivery sent, nothing leased or dead.
        #expect(
            try await db.query("SELECT count(*) FROM herald.notifications WHERE state = 'accepted'")[0].decode(
                0, as: Int.self) == count)
        #expect(try await sent() == count)
        #expect(try await db.query("SELECT count(*) FROM herald.jobs")[0].decode(0, as: Int.self) == 0)

        // At-least-once: duplicates only from batches in flight when a daemon died.
        let received = await emulator.received
        let distinct = Set(received.map(\.target)).count
        let duplicates = received.count - distinct
        let window = kills * batch * concurrency
        #expect(distinct == count)
        #expect(duplicates <= window, "\(duplicates) duplicates after \(kills) kills, window \(window)")
        print(
            "crash safety: \(kills) kills, \(count) deliveries, \(received.count) sends received, \(duplicates) duplicates (window \(window))"
        )
    }

    /// PostgreSQL is killed outright (every server process, SIGKILL) while the daemon sends, and
    /// restarted on the same port: it recovers from its WAL, the daemon rides out the outage,
    /// producers carry on, and every notification still ends sent.
    @Test func crashingPostgreSQLMidSendLosesNothing() async throws {
        let count = 2000
        let later = 200
        let batch = 100
        let concurrency = 2
        let cluster = try PrivateCluster()
        let admin = try await PostgresConnection.connect(cluster.conninfo("postgres"))
        try await admin.execute("CREATE DATABASE herald")
        await admin.close()
        let conninfo = cluster.conninfo("herald")
        let migrated = try await HeraldProcess.run(["migrate"], environment: ["HERALD_DATABASE_URL": conninfo])
        try #require(migrated.status == 0, "\(migrated.output)")

        let emulator = try await FCMEmulator.start()
        let accountFile = try ServiceAccountFile(try await emulator.makeServiceAccount(projectID: "crash"))
        defer { accountFile.remove() }
        let before = try await PostgresConnection.connect(conninfo)
        try await before.query(
            "INSERT INTO herald.apps (app_id, fcm_project_id, credentials_file) VALUES ('crash', 'crash', $1)",
            [accountFile.path])
        try await before.query(
            """
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
            SELECT 'crash', 'd' || n, 'android', 'token-' || n, 'u' || n FROM generate_series(1, $1) n
            """, [count])
        try await before.query(
            "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'crash', 'u' || n, 'hi' FROM generate_series(1, $1) n",
            [count])

        let daemon = try HeraldProcess(
            ["run"],
            environment: [
                "HERALD_DATABASE_URL": conninfo, "HERALD_WORKERS": "all", "HERALD_FCM_ENDPOINT": emulator.baseURL,
                // A lease no batch outlives on a busy machine, so that every duplicate comes from the crash.
                "HERALD_BATCH_SIZE": "\(batch)", "HERALD_CONCURRENCY": "\(concurrency)", "HERALD_LEASE": "10s",
                "HERALD_RESCUE_INTERVAL": "500ms", "HERALD_POLL_INTERVAL": "200ms",
            ])
        defer { daemon.send(SIGKILL) }
        let sendingNow = try await eventually(timeout: .seconds(30), every: .milliseconds(5)) {
            await emulator.received.count > 300
        }
        try #require(sendingNow, "\(daemon.output.suffix(2000))")
        try await cluster.crash()
        try await Task.sleep(for: .seconds(1))
        try await cluster.restart()

        // A producer after the restart: its notifications are accepted and sent as well.
        let after = try await PostgresConnection.connect(conninfo)
        try await after.query(
            "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'crash', 'u' || n, 'again' FROM generate_series(1, $1) n",
            [later])
        let finished = try await eventually(timeout: .seconds(90)) {
            try await after.query(
                """
                SELECT (SELECT count(*) FROM herald.notifications WHERE state = 'received')
                     + (SELECT count(*) FROM herald.deliveries WHERE state = 'queued')
                """)[0].decode(0, as: Int.self) == 0
        }
        #expect(finished, "\(daemon.output.suffix(2000))")
        #expect(daemon.process.isRunning, "the daemon did not survive the outage: \(daemon.output.suffix(2000))")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(20)))

        func number(_ sql: String) async throws -> Int { try await after.query(sql)[0].decode(0, as: Int.self) }
        let total = count + later
        #expect(try await number("SELECT count(*) FROM herald.notifications WHERE state = 'accepted'") == total)
        #expect(try await number("SELECT count(*) FROM herald.deliveries WHERE state = 'sent'") == total)
        #expect(try await number("SELECT count(*) FROM herald.jobs") == 0)

        // Every notification reached its device; duplicates only from batches in flight.
        let received = await emulator.received
        let distinct = Set(
            received.map { message in
                let data = message.message["data"] as? [String: Any]
                return "\(message.target) \(data?["herald_notification_id"] as? String ?? "?")"
            })
        let duplicates = received.count - distinct.count
        #expect(distinct.count == total)
        #expect(duplicates <= batch * concurrency, "\(duplicates) duplicates")
        print(
            "PostgreSQL crash: \(total) deliveries, \(received.count) sends received, \(duplicates) duplicates (window \(batch * concurrency))"
        )
    }
}
