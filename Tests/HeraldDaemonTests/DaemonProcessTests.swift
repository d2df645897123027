import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldSchema
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The real binary as a child process, against a real database.
@Suite struct DaemonProcessTests {
    func environment(_ database: TestDatabase, _ extra: [String: String] = [:]) -> [String: String] {
        ["HERALD_DATABASE_URL": database.conninfo, "HERALD_WORKERS": "sleep", "HERALD_POLL_INTERVAL": "200ms"]
            .merging(extra) { $1 }
    }

    func count(_ connection: PostgresConnection, _ condition: String) async throws -> Int {
        try await connection.query("SELECT count(*) FROM herald.jobs WHERE \(condition)")[0].decode(0, as: Int.self)
    }

    @Test func sigtermDuringABatchFinishesItAndExitsCleanly() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        // Long enough that a loaded machine still signals while the first batch runs: with 4 s,
        // the whole suite's first minute once let the first batch end before the test saw it.
        try await connection.query(
            "INSERT INTO herald.jobs (kind, payload) SELECT 'sleep', '{\"ms\": 10000}' FROM generate_series(1, 20)")
        let daemon = try HeraldProcess(
            ["run"],
            environment: environment(
                database, ["HERALD_BATCH_SIZE": "10", "HERALD_WORKER_ID": "sigterm-test", "HERALD_CONCURRENCY": "1"]))

        #expect(try await eventually { try await count(connection, "state = 'running'") == 10 }, "\(daemon.output)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(60)), "herald did not stop after SIGTERM")
        #expect(daemon.process.terminationStatus == 0, "\(daemon.output)")
        // The batch in hand was finished; nothing stays leased; the rest waits, untouched.
        #expect(try await count(connection, "state = 'running'") == 0)
        #expect(try await count(connection, "true") == 10)
        #expect(try await count(connection, "state = 'ready' AND attempts = 0") == 10)
    }

    @Test func killedDaemonsJobsAreRescuedByAnotherDaemon() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        // The victim's jobs outlast the test and it runs no retry worker to rescue its own expired
        // leases, so on a loaded machine nothing but the kill can change them. Each of its two loops takes one
        // first claim, of the smallest size, and sleeps on it.
        let jobs = 2 * BatchSizer.smallest
        try await connection.query(
            "INSERT INTO herald.jobs (kind, payload) SELECT 'sleep', '{\"ms\": 60000}' FROM generate_series(1, $1)",
            [jobs])
        let victim = try HeraldProcess(
            ["run"],
            environment: environment(
                database, ["HERALD_CONCURRENCY": "2", "HERALD_LEASE": "2s"]))
        #expect(
            try await eventually(timeout: .seconds(30)) { try await count(connection, "state = 'running'") == jobs },
            "\(victim.output)")
        victim.send(SIGKILL)
        #expect(await victim.waitForExit(timeout: .seconds(60)))
        #expect(try await count(connection, "state = 'running'") == jobs)

        try await connection.query("UPDATE herald.jobs SET payload = '{\"ms\": 10}'")
        let rescuer = try HeraldProcess(
            ["run"],
            environment: environment(database, ["HERALD_WORKERS": "sleep,retry", "HERALD_RESCUE_INTERVAL": "200ms"]))
        #expect(
            try await eventually(timeout: .seconds(20)) { try await count(connection, "true") == 0 },
            "\(rescuer.output)")
        #expect(rescuer.output.contains("rescued jobs whose lease expired"))
        rescuer.send(SIGTERM)
        #expect(await rescuer.waitForExit(timeout: .seconds(60)))
    }

    @Test func daemonIngestsWhatAProducerSendsWithinMoments() async throws {
        let database = try await TestDatabase.create()
        let producer = try await database.connect()
        try await producer.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'shop-prod');
            SELECT herald.register_device('shop', 'pixel', 'android', 'tok-1', 'alice');
            SELECT herald.register_device('shop', 'iphone', 'ios', 'tok-2', 'alice');
            """)
        // A long poll interval: only the NOTIFY can make this quick.
        let daemon = try HeraldProcess(
            ["run"], environment: environment(database, ["HERALD_WORKERS": "all", "HERALD_POLL_INTERVAL": "60s"]))
        #expect(try await eventually { daemon.output.contains("herald is running") }, "\(daemon.output)")
        let id = try await producer.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Order shipped')")[
            0
        ]
        .decode(0, as: Int64.self)
        let ingested = try await eventually(timeout: .seconds(30)) {
            try await producer.query("SELECT state FROM herald.notifications WHERE id = $1", [id])[0]
                .decode(0, as: String.self) == "accepted"
        }
        #expect(ingested, "\(daemon.output)")
        #expect(
            try await producer.query("SELECT count(*) FROM herald.deliveries WHERE notification_id = $1", [id])[0]
                .decode(0, as: Int.self) == 2)
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(60)))
    }

    /// Started before its database exists, the daemon waits for it (saying so) instead of
    /// exiting, and starts once it is there and migrated.
    @Test func runWaitsForItsDatabase() async throws {
        // A database that does not exist yet (no DROP DATABASE: it waits on every backend).
        let name = "herald_later_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try await PostgresConnection.connect("dbname=postgres")
        let environment = ["HERALD_DATABASE_URL": "dbname=\(name)", "HERALD_WORKERS": "sleep"]
        let daemon = try HeraldProcess(["run"], environment: environment)
        #expect(
            try await eventually(timeout: .seconds(10)) { daemon.output.contains("waiting for the database") },
            "\(daemon.output)")
        #expect(!daemon.output.contains("herald is running"))
        // Made and migrated under another name, then renamed: it appears whole.
        try await admin.execute("CREATE DATABASE \(name)_next")
        let migrated = try await HeraldProcess.run(
            ["migrate"], environment: ["HERALD_DATABASE_URL": "dbname=\(name)_next"])
        #expect(migrated.status == 0, "\(migrated.output)")
        try await admin.execute("ALTER DATABASE \(name)_next RENAME TO \(name)")
        // Its waits double to 30 s, and a busy machine may take a while to make the database.
        #expect(
            try await eventually(timeout: .seconds(45)) { daemon.output.contains("herald is running") },
            "\(daemon.output)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(60)))
    }

    @Test func runRefusesAnUnmigratedDatabaseAndMigrateIsIdempotent() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let refused = try await HeraldProcess.run(["run"], environment: environment(database))
        #expect(refused.status != 0)
        #expect(refused.output.contains("run `herald migrate` first"), "\(refused.output)")

        let first = try await HeraldProcess.run(["migrate"], environment: environment(database))
        #expect(first.status == 0, "\(first.output)")
        #expect(
            first.output.contains(
                "made a new database's schema from the baseline (as after migration \(Migration.embedded.last!.version))"
            ),
            "\(first.output)")
        let second = try await HeraldProcess.run(["migrate"], environment: environment(database))
        #expect(second.status == 0)
        #expect(second.output.contains("schema is up to date"))
    }

    /// A newer release migrated the database and serves only daemons newer than this one (its
    /// support window, `herald.oldest_daemon_served()`): `herald run` says so and which herald
    /// to install, before it starts any worker.
    @Test func runRefusesADatabaseWhoseSchemaNoLongerServesIt() async throws {
        let database = try await TestDatabase.create()
        try await database.connect().execute(
            """
            INSERT INTO herald.schema_migrations (version, name, checksum) VALUES (9999, '9999_future', 'x');
            CREATE OR REPLACE FUNCTION herald.oldest_daemon_served() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 9999 $$;
            """)
        let refused = try await HeraldProcess.run(["run"], environment: environment(database))
        #expect(refused.status != 0)
        #expect(
            refused.output.contains(
                "this herald carries migrations up to \(Migration.embedded.last!.version), but a newer herald migrated the"
                    + " database and it serves only daemons that carry migration 9999 or later"),
            "\(refused.output)")
    }

    @Test func badSettingStopsTheDaemonBeforeItStarts() async throws {
        let database = try await TestDatabase.create()
        let result = try await HeraldProcess.run(
            ["run"], environment: environment(database, ["HERALD_LEASE": "forever"]))
        #expect(result.status != 0)
        #expect(result.output.contains("HERALD_LEASE \"forever\" is not a duration"), "\(result.output)")
        #expect(!result.output.contains("herald is running"))
    }

    @Test func statusReportsDepthAndFlagsDeadJobs() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        let healthy = try await HeraldProcess.run(["status"], environment: environment(database))
        #expect(healthy.status == 0, "\(healthy.output)")
        #expect(healthy.output.contains("all well"))

        try await connection.query("INSERT INTO herald.jobs (kind) SELECT 'sleep' FROM generate_series(1, 3)")
        try await connection.query(
            "INSERT INTO herald.jobs (kind, state, dead_at, last_error) VALUES ('reconcile', 'dead', now(), 'boom')")
        let result = try await HeraldProcess.run(["status", "--json"], environment: environment(database))
        #expect(result.status == 1)
        struct Output: Decodable {
            struct Queue: Decodable {
                var kind: String
                var ready: Int
                var dead: Int
            }
            var queues: [Queue]
            var problems: [String]
        }
        let output = try JSONDecoder().decode(Output.self, from: Data(result.output.utf8))
        #expect(output.queues.map(\.kind) == ["reconcile", "sleep"])
        #expect(output.queues.map(\.ready) == [0, 3])
        #expect(output.queues.map(\.dead) == [1, 0])
        #expect(output.problems == ["1 dead reconcile job(s)"])

        try await connection.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'p');
            INSERT INTO herald.app_config_problems (app_id, scope, problem, since, failed_at)
            VALUES ('shop', 'fcm_apns', '401 THIRD_PARTY_AUTH_ERROR', now(), now());
            """)
        let withApp = try await HeraldProcess.run(["status"], environment: environment(database))
        #expect(withApp.status == 1)
        #expect(
            withApp.output.contains(
                "app shop, fcm_apns: 401 THIRD_PARTY_AUTH_ERROR (waiting: iOS deliveries through FCM)"),
            "\(withApp.output)")
    }

    @Test func tellsSystemdItIsReadyAndWithholdsTheWatchdogWhileAWorkerIsStuck() async throws {
        let database = try await TestDatabase.create()
        let connection = try await database.connect()
        let systemd = try NotifySocket()
        let daemon = try HeraldProcess(
            ["run"],
            environment: environment(
                database,
                ["NOTIFY_SOCKET": systemd.path, "WATCHDOG_USEC": "400000", "HERALD_CONCURRENCY": "1"]))
        let ready = await systemd.receive(timeout: .seconds(30))
        #expect(ready?.hasPrefix("READY=1") == true, "\(daemon.output)")
        #expect(await systemd.collect(for: .seconds(2)).filter { $0 == "WATCHDOG=1" }.count >= 3)

        // A batch that holds the only loop for 10 s (long enough for a loaded machine to see it
        // running first): the pings stop while it runs.
        try await connection.query("INSERT INTO herald.jobs (kind, payload) VALUES ('sleep', '{\"ms\": 10000}')")
        #expect(try await eventually { try await count(connection, "state = 'running'") == 1 })
        try await Task.sleep(for: .milliseconds(500))
        _ = await systemd.collect(for: .milliseconds(10))
        #expect(await !systemd.collect(for: .seconds(1)).contains("WATCHDOG=1"), "pinged while a loop was stuck")
        #expect(daemon.output.contains("withholding the systemd watchdog ping"))
        // Once the loop comes round, they resume; SIGTERM says STOPPING=1.
        #expect(await systemd.collect(for: .seconds(11)).contains("WATCHDOG=1"))
        daemon.send(SIGTERM)
        // A minute: the whole suite's first minute on two cores once took over 20 s here.
        #expect(await daemon.waitForExit(timeout: .seconds(60)), "\(daemon.output.suffix(3000))")
        #expect(await systemd.collect(for: .milliseconds(200)).contains("STOPPING=1"))
    }
}
