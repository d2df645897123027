import ArgumentParser
import Foundation
import HeraldCrypto
import HeraldDaemon
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldSchema
import HeraldWorkers
import Logging

/// `herald-bench`: benchmarks that print figures, using the daemon's own statements and
/// clients. The scripts in `scripts/bench-*.sh` run them beside their floors.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-bench",
        abstract: "Benchmarks that print figures.",
        subcommands: [
            QueueBench.self, HTTPBench.self, PrepareEndToEnd.self, LatencyBench.self, SoakBench.self, CryptoBench.self,
            PathsBench.self, ReceiptsBench.self,
        ])
}

/// The settings file option, as `herald` reads it: the benchmarks connect where the daemon would.
struct CommonOptions: ParsableArguments {
    @Option(name: .long, help: "A file of NAME=value settings (the environment wins over it).")
    var config: String?

    func load() throws -> Configuration {
        try Configuration.load(environment: ProcessInfo.processInfo.environment, file: config)
    }
}

/// Inserts jobs, then drains them twice: once with raw SQL (the floor: one claim-and-delete
/// statement per batch, no Swift in between) and once with the engine (claim, hand to a
/// handler, finish in one statement per batch). Prints jobs/s for both.
struct QueueBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue", abstract: "Queue engine throughput beside the raw-SQL floor.")

    @OptionGroup var options: CommonOptions
    @Option(help: "Jobs to insert for each run.") var jobs = 200_000
    @Option(help: "Jobs per claim.") var batch = 1000
    @Option(help: "Concurrent claimers, each on its own connection.") var concurrency = 2
    @Option(help: "Events for the ingest figure (users get 2 devices each, one user per 2 events); 0 skips it.")
    var events = 50_000
    @Option(help: "Events per ingest batch.") var ingestBatch = 500
    @Flag(inversion: .prefixedNo, help: "Migrate the schema first (--no-migrate: another build, which migrated it).")
    var migrate = true

    struct NoopHandler: JobHandler {
        let kind = "bench"
        func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
            Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, JobOutcome.completed) })
        }
    }

    func run() async throws {
        let configuration = try options.load()
        let setup = try await PostgresConnection.connect(configuration.databaseURL)
        if migrate { try await Migrator(logger: Logger(label: "bench")).migrate(setup) }
        let connections = try await (0..<concurrency).asyncMap { _ in
            try await PostgresConnection.connect(configuration.databaseURL)
        }

        // Floor 1: the engine's own protocol (a leasing claim, committed, then a batched delete,
        // committed) run inside the server by a procedure, so no client work sits in between.
        try await insert(setup)
        let floor = try await drain(connections) { connection in
            try await connection.withSession { session in
                try session.execute(Self.floorProcedure)
                return try session.query(
                    "CALL pg_temp.bench_floor($1, $2, $3, 0)", [JobQueue.SQL.claim, JobQueue.SQL.complete, batch]
                )[0].decode(0, as: Int.self)
            }
        }
        // Floor 2, for reference: no lease at all, one claim-and-delete statement per batch.
        try await insert(setup)
        let noLease = try await drain(connections) { connection in
            try await connection.query(
                """
                WITH picked AS (
                    SELECT id FROM herald.jobs
                    WHERE kind = 'bench' AND state = 'ready' AND run_at <= now()
                    ORDER BY run_at, id LIMIT $1 FOR UPDATE SKIP LOCKED
                )
                DELETE FROM herald.jobs AS j USING picked WHERE j.id = picked.id
                """, [batch]
            ).affectedRows
        }

        try await insert(setup)
        let handler = NoopHandler()
        let engine = try await drain(connections) { connection in
            let queue = JobQueue(connection: connection, workerID: "bench")
            let claimed = try await queue.claim(kind: "bench", limit: batch)
            let answers = await handler.handle(claimed)
            try await queue.finish(claimed.map { ($0, answers[$0.id]!) })
            return claimed.count
        }

        let ingestFigure = events > 0 ? try await ingest(setup, connections) : nil

        print("queue benchmark: \(jobs) jobs, batches of \(batch), \(concurrency) claimers")
        print(String(format: "  raw SQL floor (lease claim + batched delete, in-server): %9.0f jobs/s", floor))
        print(String(format: "  engine (claim, Swift handler, batched finish):          %9.0f jobs/s", engine))
        print(String(format: "  engine / floor: %.0f%%", engine / floor * 100))
        print(String(format: "  for reference, no lease (one delete statement a batch): %9.0f jobs/s", noLease))
        if let (ingestRate, deliveries) = ingestFigure {
            print(
                String(
                    format:
                        "ingest: %d events (2 devices per user) in batches of %d: %9.0f events/s, %d deliveries created",
                    events, ingestBatch, ingestRate, deliveries))
        }
    }

    /// The floor's loop: the engine's own claim and completion statements (`JobQueue.SQL`),
    /// each committed, run inside the server until the queue is empty. It returns how many jobs
    /// it finished through its INOUT parameter.
    static let floorProcedure = """
        CREATE OR REPLACE PROCEDURE pg_temp.bench_floor(claim text, complete text, batch int, INOUT done bigint)
        LANGUAGE plpgsql AS $$
        DECLARE
            ids bigint[];
            claimed record;
        BEGIN
            LOOP
                ids := '{}';
                FOR claimed IN EXECUTE claim USING 'bench', now(), batch, 'floor', 60 LOOP
                    ids := ids || claimed.id;
                END LOOP;
                COMMIT;
                EXIT WHEN cardinality(ids) = 0;
                EXECUTE complete USING ids;
                COMMIT;
                done := done + cardinality(ids);
            END LOOP;
        END;
        $$;
        """

    /// Events normalized into deliveries per second, through the ingest worker and the engine.
    private func ingest(_ setup: PostgresConnection, _ connections: [PostgresConnection]) async throws -> (Double, Int)
    {
        let users = max(1, events / 2)
        try await setup.execute(
            """
            DELETE FROM herald.deliveries;
            DELETE FROM herald.notifications;
            DELETE FROM herald.devices;
            DELETE FROM herald.apps;
            INSERT INTO herald.apps (app_id) VALUES ('bench');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('bench', 'bench');
            """)
        try await setup.query(
            """
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
            SELECT 'bench', 'device-' || n || '-' || p, p, 'token-' || n || '-' || p, 'user-' || n
            FROM generate_series(1, $1) AS n, unnest(ARRAY['android', 'ios']) AS p
            """, [users])
        try await setup.query(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title, body, data)
            SELECT 'bench', 'user-' || (n % $2 + 1), 'Hello', 'A benchmark notification', jsonb_build_object('order', n::text)
            FROM generate_series(1, $1) AS n
            """, [events, users])
        for table in ["notifications", "devices"] {
            try await setup.execute("VACUUM ANALYZE herald.\(table)")
        }
        let batch = ingestBatch
        let rate = try await drain(connections) { connection in
            let worker = IngestWorker(
                context: WorkerContext(connection: connection, clock: SystemClock(), logger: Logger(label: "bench")))
            return try await worker.runBatch(limit: batch, isStopping: { false })
        }
        let deliveries = try await setup.query("SELECT count(*) FROM herald.deliveries")[0].decode(0, as: Int.self)
        return (rate, deliveries)
    }

    private func insert(_ connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM herald.jobs WHERE kind = 'bench'")
        try await connection.query(
            "INSERT INTO herald.jobs (kind, ref) SELECT 'bench', n FROM generate_series(1, $1) AS n", [jobs])
        try await connection.execute("VACUUM ANALYZE herald.jobs")
    }

    /// Runs `step` on every connection until the queue is empty; returns jobs per second.
    private func drain(
        _ connections: [PostgresConnection], step: @escaping @Sendable (PostgresConnection) async throws -> Int
    ) async throws -> Double {
        let start = ContinuousClock.now
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for connection in connections {
                group.addTask {
                    var done = 0
                    while true {
                        let count = try await step(connection)
                        if count == 0 { return done }
                        done += count
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(total) / (ContinuousClock.now - start).seconds
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// Sends FCM-sized POSTs through ``HTTPClient`` with a fixed number in flight and prints
/// requests/s. `scripts/bench-http.sh` runs it beside h2load against the nginx stand-in.
struct HTTPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http", abstract: "HTTP/2 client throughput against a URL.")

    @Option(help: "The URL to POST to.") var url: String
    @Option(help: "A CA bundle to trust (the stand-in's self-signed certificate).") var caBundle: String?
    @Option(help: "Requests to send.") var requests = 100_000
    @Option(help: "Requests in flight at once.") var concurrency = 1000
    @Option(help: "Connections per host.") var connections = 4
    @Option(help: "HTTP client event-loop threads (default: the client's).") var threads: Int?
    @Option(help: "Streams per connection handed to libcurl at once.") var streams = 100
    @Option(help: "Requests per batch (the dispatch worker's form); 1 sends each request from its own task.")
    var batch = 500
    @Flag(help: "Send through libcurl instead of the HTTP/2 engine.") var libcurl = false

    func run() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = caBundle
        configuration.maxConnectionsPerHost = connections
        configuration.maxConcurrentStreams = streams
        if let threads { configuration.threads = threads }
        configuration.usesHTTP2Engine = !libcurl
        let client = HTTPClient(configuration: configuration)
        let body = Array(
            #"{"message":{"token":"bench-token","data":{"title":"Hello","body":"A benchmark notification","notification_id":"123456"},"android":{"priority":"HIGH","ttl":"86400s"}}}"#
                .utf8)
        // FCM's access tokens are about 1,024 characters.
        let request = HTTPRequest(
            url: url,
            headers: [
                ("content-type", "application/json"),
                ("authorization", "Bearer " + String(repeating: "t", count: 1024)),
            ], body: body)
        // Warm up: open the connections before the clock starts, as h2load does.
        _ = try await client.send(request)

        let cpu = processCPU()
        let start = ContinuousClock.now
        let (ok, failed, opened) = try await withThrowingTaskGroup(of: (Int, Int, Int).self) { group in
            // `concurrency / batch` senders, each sending batch after batch until the total is sent.
            let senders = max(1, concurrency / batch)
            let perSender = requests / senders
            for _ in 0..<senders {
                group.addTask {
                    var ok = 0
                    var failed = 0
                    var opened = 0
                    var left = perSender
                    while left > 0 {
                        let size = min(batch, left)
                        left -= size
                        let results: [Result<HTTPResponse, HTTPClientError>]
                        if batch == 1 {
                            do {
                                results = [.success(try await client.send(request))]
                            } catch {
                                results = [
                                    .failure(
                                        error as? HTTPClientError
                                            ?? HTTPClientError(kind: .other, curlCode: 0, message: "\(error)"))
                                ]
                            }
                        } else {
                            results = await client.send(Array(repeating: request, count: size))
                        }
                        for result in results {
                            if case .success(let response) = result, response.status == 200 {
                                ok += 1
                                opened += response.newConnections
                            } else {
                                if failed == 0 { print("first failure: \(result)") }
                                failed += 1
                            }
                        }
                    }
                    return (ok, failed, opened)
                }
            }
            return try await group.reduce((0, 0, 0)) { ($0.0 + $1.0, $0.1 + $1.1, $0.2 + $1.2) }
        }
        let seconds: Double = (ContinuousClock.now - start).seconds
        let total = ok + failed
        let rate = Double(total) / seconds
        print(
            "herald HTTPClient (\(libcurl ? "libcurl" : "HTTP/2 engine")), "
                + String(
                    format:
                        "%d event-loop thread(s): %d requests (%d ok, %d failed) in %.2fs: %.0f req/s, %.1f µs CPU a request, %d connections opened",
                    configuration.threads, total, ok, failed, seconds, rate, (processCPU() - cpu) / Double(total) * 1e6,
                    opened + 1))
        client.shutdown()
    }
}

/// Prepares `scripts/bench-e2e.sh` and the others: devices (one user each), notifications
/// waiting for ingest, and the app's credentials: a service account whose token endpoint is the
/// stand-in, and with `--push apns` or `web` an APNs key or a VAPID key.
struct PrepareEndToEnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prepare-e2e", abstract: "Load devices and notifications for the end-to-end benchmark.")

    /// Which path the devices are sent to.
    enum Push: String, ExpressibleByArgument {
        /// Half Android, half iOS, all through FCM.
        case fcm
        /// iPhones, straight to APNs with a .p8 key.
        case apns
        /// Browsers (Web Push), each subscription with a key pair of its own.
        case web
    }

    @OptionGroup var options: CommonOptions
    @Option(help: "Notifications waiting for ingest.") var notifications = 100_000
    @Option(help: "Devices, one user each (default: as many as notifications).") var devices: Int?
    @Option(help: "fcm (half Android, half iOS, through FCM), apns (iPhones, straight to APNs) or web (browsers).")
    var push: Push = .fcm
    @Option(help: "The token endpoint the generated service account names.") var tokenURI: String
    @Option(help: "Where to write the generated service account.") var credentialsOut: String
    @Option(help: "With --push apns: where to write the generated APNs key (.p8).") var apnsKeyOut: String?
    @Option(help: "With --push web: where to write the generated VAPID key.") var vapidKeyOut: String?
    @Option(help: "With --push web: the push service's base URL; subscription N's endpoint is BASE/push/N.")
    var pushServiceURL: String?
    @Flag(inversion: .prefixedNo, help: "Migrate the schema first (--no-migrate: another build, which migrated it).")
    var migrate = true

    func run() async throws {
        let configuration = try options.load()
        let connection = try await PostgresConnection.connect(configuration.databaseURL)
        if migrate { try await Migrator(logger: Logger(label: "bench")).migrate(connection) }
        let account = try ServiceAccount.generate(projectID: "bench", tokenURI: tokenURI)
        try account.writeFile(to: credentialsOut)
        try await connection.execute(
            """
            TRUNCATE herald.jobs, herald.deliveries, herald.notifications, herald.devices, herald.apps CASCADE;
            """)
        // The providers' tables, which every schema since migration 031 has (a before and after
        // runs against an older build's schema).
        try await connection.query("INSERT INTO herald.apps (app_id) VALUES ('bench')")
        try await connection.query(
            "INSERT INTO herald.app_fcm (app_id, project_id, credentials_file) VALUES ('bench', 'bench', $1)",
            [credentialsOut])
        let devices = devices ?? notifications
        switch push {
        case .fcm:
            try await connection.query(
                """
                INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref)
                SELECT 'bench', 'device-' || n, CASE WHEN n % 2 = 0 THEN 'android' ELSE 'ios' END, 'token-' || n,
                       'user-' || n
                FROM generate_series(1, $1) AS n
                """, [devices])
        case .apns:
            guard let apnsKeyOut else { throw ValidationError("--push apns needs --apns-key-out") }
            try Data(try CryptoKey.generateP256().privateKeyPEM().utf8).write(to: URL(fileURLWithPath: apnsKeyOut))
            try await connection.query(
                """
                INSERT INTO herald.app_apns (app_id, environment, bundle_id, team_id, key_id, key_file)
                VALUES ('bench', 'development', 'com.example.bench', 'TEAM000001', 'KEY0000001', $1)
                """, [apnsKeyOut])
            try await connection.query("UPDATE herald.apps SET ios_transport = 'apns'")
            try await connection.query(
                """
                INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind)
                SELECT 'bench', 'device-' || n, 'ios', lpad(to_hex(n), 64, '0'), 'user-' || n, 'apns_device_token'
                FROM generate_series(1, $1) AS n
                """, [devices])
        case .web:
            guard let vapidKeyOut, let pushServiceURL else {
                throw ValidationError("--push web needs --vapid-key-out and --push-service-url")
            }
            try Data(try CryptoKey.generateP256().privateKeyPEM().utf8).write(to: URL(fileURLWithPath: vapidKeyOut))
            try await connection.query(
                """
                INSERT INTO herald.app_webpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
                VALUES ('bench', $1, 'mailto:bench@example.org', '{*}', true)
                """, [vapidKeyOut])
            // A key pair per browser, as browsers have: nothing about one subscription's key can
            // be reused for the next. Their base64url forms, comma-separated, in one parameter.
            let keys = try (0..<devices).map { _ in Base64URL.encode(try CryptoKey.generateP256().publicPoint()) }
            try await connection.query(
                """
                INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind, web_p256dh,
                                            web_auth)
                SELECT 'bench', 'device-' || n, 'web', $1 || '/push/' || n, 'user-' || n, 'web_subscription',
                       herald.base64url_decode(key), decode(replace(gen_random_uuid()::text, '-', ''), 'hex')
                FROM unnest(string_to_array($2, ',')) WITH ORDINALITY AS k(key, n)
                """, [pushServiceURL, keys.joined(separator: ",")])
        }
        try await connection.query(
            """
            INSERT INTO herald.notifications (app_id, user_ref, title, body, data)
            SELECT 'bench', 'user-' || n, 'Hello', 'A benchmark notification', jsonb_build_object('order', n::text)
            FROM generate_series(1, $1) AS n
            """, [notifications])
        for table in ["notifications", "devices"] {
            try await connection.execute("VACUUM ANALYZE herald.\(table)")
        }
        print("prepared \(notifications) notifications for \(devices) devices (\(push.rawValue))")
    }
}

/// Sends notifications at a steady rate while a daemon runs (after `prepare-e2e`), then prints
/// percentiles of the time from the producer's commit to the provider's answer (`sent_at - created_at`).
/// By default a commit every 10 ms carries a hundredth of the rate; `--per-commit 1` is a trickle,
/// one notification a commit, as a backend commits one per business event, from `--producers`
/// connections taking turns. `--commits-only` makes the commits and prints the producers' own CPU
/// without waiting for a daemon: run with none, it gives what the commits cost alone.
struct LatencyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Commit-to-send latency at a steady rate, against a running daemon (or the commits alone).")

    @OptionGroup var options: CommonOptions
    @Option(help: "Notifications per second.") var rate = 1000
    @Option(help: "How long to send.") var seconds = 10
    @Option(help: "Users to send to (prepare-e2e made user-1 … user-N).") var users = 100_000
    @Option(help: "Notifications per commit (default: a hundredth of the rate, a commit every 10 ms).")
    var perCommit: Int?
    @Option(help: "Producers, each committing on a connection of its own, in turns.") var producers = 1
    @Flag(help: "Commit at the rate and return without waiting for sends; prints the producers' own CPU.")
    var commitsOnly = false

    func run() async throws {
        let configuration = try options.load()
        let connection = try await PostgresConnection.connect(configuration.databaseURL)
        let marker = try await connection.query("SELECT coalesce(max(id), 0) FROM herald.notifications")[0]
            .decode(0, as: Int64.self)
        let perCommit = perCommit ?? max(1, rate / 100)
        let commits = max(1, rate * seconds / perCommit)
        let interval = Duration.seconds(seconds) / commits
        let connections = try await (0..<max(1, producers)).asyncMap { _ in
            try await PostgresConnection.connect(configuration.databaseURL)
        }
        let cpuBefore = processCPU()
        // Commit k is due at start + k × interval, on connection k mod producers: the commit is
        // when the clock starts.
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (producer, connection) in connections.enumerated() {
                group.addTask { [users] in
                    for commit in stride(from: producer, to: commits, by: connections.count) {
                        let due = start.advanced(by: interval * commit)
                        if due > ContinuousClock.now { try await Task.sleep(until: due) }
                        try await connection.query(
                            """
                            INSERT INTO herald.notifications (app_id, user_ref, title, body)
                            SELECT 'bench', 'user-' || (($1::int * $2::int + n) % $3::int + 1), 'Latency', 'probe'
                            FROM generate_series(1, $2::int) AS n
                            """, [commit, perCommit, users])
                    }
                }
            }
            try await group.waitForAll()
        }
        let sent = commits * perCommit
        let elapsed = (ContinuousClock.now - start).seconds
        let cpuAfterSending = processCPU()
        let producerCPU = String(
            format:
                "  %d notifications a commit, from %d producer connections, whose own CPU was %.0f µs a notification",
            perCommit, connections.count, (cpuAfterSending - cpuBefore) / Double(sent) * 1e6)
        if commitsOnly {
            print(String(format: "commits alone at %.0f notifications/s for %ds:", Double(sent) / elapsed, seconds))
            print(producerCPU)
            return
        }
        // Wait for every probe's delivery to be final.
        while try await connection.query(
            """
            SELECT count(*) FROM herald.notifications n
            WHERE n.id > $1 AND n.app_id = 'bench' AND (n.state = 'received'
                  OR EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.notification_id = n.id AND d.state = 'queued'))
            """, [marker])[0].decode(0, as: Int.self) > 0
        {
            try await Task.sleep(for: .milliseconds(100))
        }
        let row = try await connection.query(
            """
            SELECT count(*),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - n.created_at)),
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - n.created_at)),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - n.created_at)),
                   max(extract(epoch FROM d.sent_at - n.created_at)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM n.ingested_at - n.created_at)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - n.ingested_at))
            FROM herald.notifications n JOIN herald.deliveries d ON d.notification_id = n.id
            WHERE n.id > $1 AND n.app_id = 'bench' AND d.state = 'sent'
            """, [marker])[0]
        let values = try (1...6).map { try row.decode($0, as: Double.self) * 1000 }
        print(
            String(
                format:
                    "latency at %.0f notifications/s for %ds (%d sent): p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms",
                Double(sent) / elapsed, seconds, try row.decode(0, as: Int.self), values[0], values[1], values[2],
                values[3]))
        print(producerCPU)
        print(
            String(
                format: "  p50 of its parts: commit to ingested %.1f ms, ingested to the provider's answer %.1f ms",
                values[4],
                values[5]))
    }
}

/// This process's CPU time so far (every thread, user and system), in seconds.
func processCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let seconds = { (time: timeval) in Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
