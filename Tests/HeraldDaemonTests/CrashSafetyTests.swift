import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Real crashes, of the daemon and of PostgreSQL, while notifications flow. Nothing may be
/// lost, and duplicates must stay within the in-flight window.
@Suite struct CrashSafetyTests {
    static let batch = 100
    static let concurrency = 2
    /// Routes the load sends on (FCM for the phones, APNs for the iPhones): each dispatch loop
    /// has up to a claim's worth in flight per route.
    static let routes = 2

    @Test func killingTheDaemonMidSendLosesNothing() async throws {
        try await takingTurns {
            let count = 3000
            let database = try await TestDatabase.create()
            let db = try await database.connect()
            // Half the devices are iPhones whose app sends straight to APNs.
            let load = try await CrashLoad.start(db, notifications: count, iPhonesOnAPNs: true)
            defer { load.accountFile.remove() }
            let environment = load.daemonEnvironment(database.conninfo, lease: "2s", rescueInterval: "200ms")
            func sent() async throws -> Int {
                try await db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'sent'")[0].decode(
                    0, as: Int.self)
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
                #expect(await daemon.waitForExit(timeout: .seconds(60)))
                kills += 1
                if try await sent() == count { break }
            }

            let survivor = try HeraldProcess(["run"], environment: environment)
            #expect(try await CrashLoad.finishes(db), "\(survivor.output.suffix(2000))")
            survivor.send(SIGTERM)
            #expect(await survivor.waitForExit(timeout: .seconds(60)))

            let sends = try await load.checkNothingLost(
                db, notifications: count, window: kills * Self.batch * Self.concurrency * Self.routes)
            let throughAPNs = await load.emulator.apnsReceived.count
            print(
                "crash safety: \(kills) kills, \(count) deliveries (half straight to APNs), \(sends); \(throughAPNs) to APNs"
            )
            #expect(throughAPNs >= count / 2)
        }
    }

    /// PostgreSQL is killed outright (every server process, SIGKILL) while the daemon sends, and
    /// restarted on the same port: it recovers from its WAL, the daemon rides out the outage,
    /// producers carry on, and every notification still ends sent, once.
    @Test func crashingPostgreSQLMidSendLosesNothing() async throws {
        try await takingTurns {
            let count = 2000
            let later = 200
            let cluster = try await onOwnThread { try PrivateCluster() }
            let admin = try await PostgresConnection.connect(cluster.conninfo("postgres"))
            try await admin.execute("CREATE DATABASE herald")
            await admin.close()
            let conninfo = cluster.conninfo("herald")
            let migrated = try await HeraldProcess.run(["migrate"], environment: ["HERALD_DATABASE_URL": conninfo])
            try #require(migrated.status == 0, "\(migrated.output)")
            let load = try await CrashLoad.start(try await PostgresConnection.connect(conninfo), notifications: count)
            defer { load.accountFile.remove() }

            // A long lease: a batch whose outcomes were lost would be sent again only once it runs
            // out, long after everything else is done.
            let daemon = try HeraldProcess(
                ["run"], environment: load.daemonEnvironment(conninfo, lease: "300s", rescueInterval: "500ms"))
            defer { daemon.send(SIGKILL) }
            let sendingNow = try await eventually(timeout: .seconds(30), every: .milliseconds(5)) {
                await load.emulator.received.count > 300
            }
            try #require(sendingNow, "\(daemon.output.suffix(2000))")
            try await cluster.crash()
            try await Task.sleep(for: .seconds(1))
            try await cluster.restart()
            let restarted = ContinuousClock.now

            // A producer after the restart: its notifications are accepted and sent as well.
            let after = try await PostgresConnection.connect(conninfo)
            try await after.query(
                "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'crash', 'u' || n, 'again' FROM generate_series(1, $1) n",
                [later])
            // Batches sent while the database was away keep their outcomes and record them when it is
            // back, so nothing waits for its lease to run out, but a claim whose reply the crash cut
            // off (committed, never heard): that one waits out its 300 s lease, hence the bound.
            #expect(try await CrashLoad.finishes(after, within: .seconds(360)), "\(daemon.output.suffix(2000))")
            let drained = ContinuousClock.now - restarted
            #expect(daemon.process.isRunning, "the daemon did not survive the outage: \(daemon.output.suffix(2000))")
            let kept = daemon.output.components(separatedBy: "recording a batch failed; retrying").count - 1
            daemon.send(SIGTERM)
            #expect(await daemon.waitForExit(timeout: .seconds(60)))

            // Nothing FCM accepted is sent again. The one exception is not the database's doing: a
            // send whose answer never came (the emulator, on a loaded machine, answered after the
            // client's timeout) is retried, at least once by design; such a send says in the
            // delivery's error history that FCM did not answer in time (or was unreachable).
            let unanswered = try await after.query(
                """
                SELECT count(*) FROM herald.deliveries
                WHERE array_to_string(error_history, ' ') ~ 'FCM (unreachable|did not answer in time)'
                """
            )[0].decode(0, as: Int.self)
            let sends = try await load.checkNothingLost(after, notifications: count + later, window: unanswered)
            print(
                "PostgreSQL crash: \(count + later) deliveries, \(sends); \(kept) tries to record outcomes kept"
                    + " while it was away; all final \(String(format: "%.1f", drained.seconds)) s after the restart"
                    + " (lease 300 s)")
        }
    }
}

/// The crash tests' load: app `crash` on the emulator, one device per user (Android, or with
/// `iPhonesOnAPNs` every even one an iPhone with an APNs device token, sent straight to APNs
/// through the emulator's TLS front), and a notification for each.
struct CrashLoad {
    let emulator: Emulator
    let accountFile: ServiceAccountFile
    let apnsFront: NginxStandIn?
    let apnsKey: SecretFile?

    static func start(_ db: PostgresConnection, notifications count: Int, iPhonesOnAPNs: Bool = false) async throws
        -> CrashLoad
    {
        let emulator = try await Emulator.start()
        let accountFile = try ServiceAccountFile(try await emulator.makeServiceAccount(projectID: "crash"))
        try await db.addApp("crash", fcmProject: "crash", credentialsFile: accountFile.path)
        var front: NginxStandIn?
        var key: SecretFile?
        if iPhonesOnAPNs {
            front = try await NginxStandIn.start(upstream: emulator.port)
            let pem = try await emulator.makeAPNsKey(
                teamID: "CRASHTEAM1", keyID: "CRASHKEY01", topics: ["com.example.crash"])
            key = try SecretFile(contents: pem, suffix: ".p8")
            try await db.query(
                """
                INSERT INTO herald.app_apns (app_id, bundle_id, team_id, key_id, key_file)
                VALUES ('crash', 'com.example.crash', 'CRASHTEAM1', 'CRASHKEY01', $1)
                """, [key!.path])
            try await db.query("UPDATE herald.apps SET ios_transport = 'apns'")
        }
        try await db.query(
            """
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind)
            SELECT 'crash', 'd' || n, CASE WHEN $2 AND n % 2 = 0 THEN 'ios' ELSE 'android' END,
                   CASE WHEN $2 AND n % 2 = 0 THEN lpad(to_hex(n), 64, '0') ELSE 'token-' || n END, 'u' || n,
                   CASE WHEN $2 AND n % 2 = 0 THEN 'apns_device_token' ELSE 'registration_token' END
            FROM generate_series(1, $1) n
            """, [count, iPhonesOnAPNs])
        try await db.query(
            "INSERT INTO herald.notifications (app_id, user_ref, title) SELECT 'crash', 'u' || n, 'hi' FROM generate_series(1, $1) n",
            [count])
        return CrashLoad(emulator: emulator, accountFile: accountFile, apnsFront: front, apnsKey: key)
    }

    func daemonEnvironment(_ conninfo: String, lease: String, rescueInterval: String) -> [String: String] {
        var environment = [
            "HERALD_DATABASE_URL": conninfo, "HERALD_WORKERS": "all", "HERALD_FCM_ENDPOINT": emulator.baseURL,
            "HERALD_BATCH_SIZE": "\(CrashSafetyTests.batch)", "HERALD_CONCURRENCY": "\(CrashSafetyTests.concurrency)",
            "HERALD_LEASE": lease, "HERALD_RESCUE_INTERVAL": rescueInterval, "HERALD_POLL_INTERVAL": "200ms",
        ]
        if let apnsFront {
            environment["HERALD_APNS_ENDPOINT"] = apnsFront.baseURL
            environment["HERALD_CA_BUNDLE"] = apnsFront.caBundle
        }
        return environment
    }

    /// Waits until no notification waits for ingest and no delivery is queued.
    static func finishes(_ db: PostgresConnection, within timeout: Duration = .seconds(60)) async throws -> Bool {
        try await eventually(timeout: timeout) {
            try await db.query(
                """
                SELECT (SELECT count(*) FROM herald.notifications WHERE state = 'received')
                     + (SELECT count(*) FROM herald.deliveries WHERE state = 'queued')
                """)[0].decode(0, as: Int.self) == 0
        }
    }

    /// Whether a delivery was sent (and recorded) since `date`; false while the database is away.
    static func sentAny(_ db: PostgresConnection, since date: Date) async -> Bool {
        let sent = try? await db.query(
            "SELECT count(*) FROM herald.deliveries WHERE state = 'sent' AND sent_at >= $1", [date]
        )[0].decode(0, as: Int.self)
        return (sent ?? 0) > 0
    }

    /// Nothing lost: every notification accepted, every delivery sent, no job left, every
    /// notification received by its device. At-least-once: at most `window` sends repeated.
    /// Returns a line with the figures.
    func checkNothingLost(_ db: PostgresConnection, notifications count: Int, window: Int) async throws -> String {
        func number(_ sql: String) async throws -> Int { try await db.query(sql)[0].decode(0, as: Int.self) }
        #expect(try await number("SELECT count(*) FROM herald.notifications WHERE state = 'accepted'") == count)
        let unsent = try await db.query(
            "SELECT state || ': ' || coalesce(last_error, '') || ' (' || count(*) || ')' FROM herald.deliveries WHERE state <> 'sent' GROUP BY state, last_error"
        ).map { try $0.decode(0, as: String.self) }
        let detail = try await db.query(
            "SELECT d.id || ' n=' || n.id || ' exp=' || coalesce(n.expires_at::text, 'NULL') || ' st=' || n.state || ' ing=' || coalesce(n.ingested_at::text,'NULL') || ' att=' || d.attempts || ' hist=' || array_to_string(d.error_history, '|') FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id WHERE d.state <> 'sent' LIMIT 3"
        ).map { try $0.decode(0, as: String.self) }
        #expect(unsent.isEmpty, "deliveries not sent: \(unsent) \(detail)")
        #expect(try await number("SELECT count(*) FROM herald.jobs") == 0)

        // Every send each device got, through FCM or straight to APNs.
        let received =
            await emulator.received.map { message in
                let data = message.message["data"] as? [String: Any]
                return "\(message.target) \(data?["herald_notification_id"] as? String ?? "?")"
            }
            + (await emulator.apnsReceived.map {
                "\($0.deviceToken) \($0.document["herald_notification_id"] as? String ?? "?")"
            })
        let distinct = Set(received)
        let duplicates = received.count - distinct.count
        #expect(distinct.count == count)
        #expect(duplicates <= window, "\(duplicates) duplicates, window \(window)")
        return "\(received.count) sends received, \(duplicates) duplicates (window \(window))"
    }
}
