import Foundation
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import Testing

@testable import HeraldWorkers

/// A migrated database with app `shop`, the emulator holding its service account, and the
/// workers' context, for tests that send. With `webPush` or `apns`, the emulator's push
/// service and APNs are reachable over TLS and HTTP/2 through nginx; with `webPush`, `shop`
/// has a VAPID key; with `apns`, it sends iOS straight to APNs with a key of team
/// `TEAM123456` for bundle `com.example.shop` (or, with `apnsCertificate`, that push
/// certificate, which the front checks). `alsoTrusting`: CA files the HTTP client trusts besides
/// the front's (other TLS servers').
struct WorkerFixture {
    let emulator: Emulator
    let db: PostgresConnection
    let database: TestDatabase
    let context: WorkerContext
    let queue: JobQueue
    /// Kept for the fixture's lifetime: the app's credentials file.
    let accountFile: ServiceAccountFile
    /// The push service's TLS front, and the app's VAPID key, when made `webPush`.
    let pushService: NginxStandIn?
    let vapid: VAPIDKeyFile?
    let apnsKey: SecretFile?

    static let bundleID = "com.example.shop"

    static func make(
        clock: any WallClock = SystemClock(), webPush: Bool = false, apns: Bool = false,
        apnsCertificate: SecretFile? = nil, unifiedPush: Bool = true, alsoTrusting: [String] = []
    ) async throws -> WorkerFixture {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "shop-prod")
        let accountFile = try ServiceAccountFile(account)
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.addApp("shop", fcmProject: "shop-prod", credentialsFile: accountFile.path)
        var http = HTTPClient.Configuration()
        var pushService: NginxStandIn?
        var vapid: VAPIDKeyFile?
        var apnsKey: SecretFile?
        var providers = Senders.Configuration()
        // Every provider is pointed at the emulator, which serves each under its own paths, but
        // APNs, reached only through a TLS front (below).
        providers.endpoints = Dictionary(
            uniqueKeysWithValues: Providers.compiledIn.filter { $0 != APNsRoute.self }.map {
                ($0.name, emulator.baseURL)
            })
        if unifiedPush { providers.turnedOn = ["HERALD_UNIFIEDPUSH"] }
        if webPush || apns || apnsCertificate != nil {
            let front = try await NginxStandIn.start(upstream: emulator.port, clientCA: apnsCertificate?.path)
            http.caBundle = front.caBundle
            if !alsoTrusting.isEmpty {
                // Each server's self-signed certificate, in one bundle.
                let bundle = front.directory.appendingPathComponent("bundle.pem")
                let certificates = try ([front.caBundle] + alsoTrusting).map {
                    try String(contentsOfFile: $0, encoding: .utf8)
                }
                try certificates.joined().write(to: bundle, atomically: true, encoding: .utf8)
                http.caBundle = bundle.path
            }
            providers.endpoints["apns"] = front.baseURL
            providers.endpoints[APNsRoute.channelsEndpoint] = front.baseURL
            pushService = front
        }
        if webPush {
            let key = try VAPIDKeyFile()
            try await db.query(
                // The stand-in push service is on this machine: allow it by name and address.
                """
                INSERT INTO herald.app_webpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
                VALUES ('shop', $1, 'mailto:push@shop.example', '{localhost,127.0.0.1}', true)
                """, [key.path])
            vapid = key
        }
        if let apnsCertificate {
            await emulator.allowAPNsCertificate(topic: bundleID)
            try await db.query(
                """
                INSERT INTO herald.app_apns (app_id, environment, bundle_id, certificate_file)
                VALUES ('shop', 'development', $1, $2)
                """, [bundleID, apnsCertificate.path])
            try await db.query("UPDATE herald.apps SET ios_transport = 'apns'")
        } else if apns {
            let key = try SecretFile(
                contents: try await emulator.makeAPNsKey(teamID: "TEAM123456", keyID: "KEY1234567", topics: [bundleID]),
                suffix: ".p8")
            try await db.query(
                """
                INSERT INTO herald.app_apns (app_id, environment, bundle_id, team_id, key_id, key_file)
                VALUES ('shop', 'development', $1, 'TEAM123456', 'KEY1234567', $2)
                """, [bundleID, key.path])
            try await db.query("UPDATE herald.apps SET ios_transport = 'apns'")
            apnsKey = key
        }
        let context = WorkerContext(
            connection: db, clock: clock, logger: Logger(label: "test"),
            senders: Senders(
                http: HTTPClient(configuration: http), configuration: providers, logger: Logger(label: "test")))
        return WorkerFixture(
            emulator: emulator, db: db, database: database, context: context,
            queue: JobQueue(connection: db, workerID: "test", clock: clock), accountFile: accountFile,
            pushService: pushService, vapid: vapid, apnsKey: apnsKey)
    }

    /// A push certificate for the fixture's bundle, valid for `days`, with its key (PEM), as
    /// Apple issues one (a self-signed stand-in, which the front trusts).
    static func pushCertificate(days: Int) async throws -> SecretFile {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-cert-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let made = try await runProgram(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "\(days)",
                "-subj", "/UID=\(bundleID)/CN=Apple Development IOS Push Services: \(bundleID)",
                "-keyout", directory.appendingPathComponent("key.pem").path,
                "-out", directory.appendingPathComponent("cert.pem").path,
            ])
        try #require(made.status == 0, "\(made.output)")
        let pem =
            try String(contentsOf: directory.appendingPathComponent("cert.pem"), encoding: .utf8)
            + String(contentsOf: directory.appendingPathComponent("key.pem"), encoding: .utf8)
        return try SecretFile(contents: pem, suffix: ".pem")
    }

    /// An APNs device token for `device`: 64 hex digits.
    static func apnsToken(_ device: String) -> String {
        let hex = Array(device.utf8).map { String(format: "%02x", $0) }.joined()
        return String((hex + String(repeating: "0", count: 64)).prefix(64))
    }

    /// Registers an iPhone with its APNs device token; returns the token.
    @discardableResult
    func registerIPhone(_ device: String, user: String = "alice") async throws -> String {
        let token = Self.apnsToken(device)
        _ = try await db.query("SELECT herald.register_device('shop', $1, 'ios', $2, $3)", [device, token, user])
        return token
    }

    /// Subscribes a browser at the emulator's push service, bound to the app's VAPID key, and
    /// registers it as a web device; returns its endpoint.
    @discardableResult
    func registerBrowser(_ device: String, user: String = "alice") async throws -> String {
        let front = try #require(pushService)
        let subscription = try await emulator.subscribe(
            base: front.baseURL, applicationServerKey: try #require(vapid).publicKey)
        _ = try await db.query(
            "SELECT herald.register_device('shop', $1, 'web', $2, $3)", [device, subscription.json, user])
        return subscription.endpoint
    }

    func register(_ device: String, _ platform: String, user: String = "alice") async throws {
        _ = try await db.query(
            "SELECT herald.register_device('shop', $1, $2, $3, $4)", [device, platform, "token-\(device)", user])
    }

    /// Dispatches as a minute later would, for the app's configuration problems: a delivery
    /// waiting on one goes out as a probe. All that is queued is due, or only `device`'s (the
    /// rest wait an hour), so the probe is that device's.
    func probeAgain(only device: String? = nil) async throws {
        try await db.query(
            """
            UPDATE herald.app_config_problems SET failed_at = now() - interval '61 seconds'
            """)
        try await db.query(
            """
            UPDATE herald.deliveries d
            SET run_at = CASE WHEN $1::text IS NULL OR dev.device_id = $1 THEN now() - interval '1 second'
                              ELSE now() + interval '1 hour' END
            FROM herald.devices dev WHERE dev.id = d.device_id AND d.state = 'queued'
            """, [device])
        try await dispatch()
    }

    /// The fixture's context as a daemon started since would have it: senders of its own, the
    /// same configuration, nothing in their memory.
    func restartedContext() async -> WorkerContext {
        var restarted = context
        if let senders = context.senders {
            restarted.senders = Senders(
                http: await senders.http, configuration: await senders.configuration, logger: await senders.logger)
        }
        return restarted
    }

    func ingest() async throws { try await IngestWorker(context: context).drain() }
    func dispatch() async throws { try await DispatchWorker(context: context).drain() }
    func reconcile() async throws { try await queue.drain(ReconcileWorker(context: context)) }

    func delivery(of device: String) async throws -> (state: String, error: String?, name: String?) {
        let row = try await db.query(
            """
            SELECT d.state, d.last_error, d.provider_message_id FROM herald.deliveries d
            JOIN herald.devices dev ON dev.id = d.device_id WHERE dev.device_id = $1 ORDER BY d.id DESC LIMIT 1
            """, [device])[0]
        return (try row.decode(0), try row.decode(1, as: String?.self), try row.decode(2, as: String?.self))
    }

    /// What a provider's refusal of the app's setup leaves: `device`'s delivery waiting with
    /// `words` in its last error, one problem, of `scope`, and no phone disabled.
    func expectHeldBackForItsSetup(
        _ device: String, saying words: String, scope: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let waiting = try await delivery(of: device)
        #expect(
            waiting.state == "queued" && waiting.error?.contains(words) == true, "\(waiting)",
            sourceLocation: sourceLocation)
        let problems = try await db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(problems == [scope], sourceLocation: sourceLocation)
        let disabled = try await db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(disabled.isEmpty, "no phone is disabled for the app's setup", sourceLocation: sourceLocation)
    }

    func message(to token: String) async -> [String: Any]? {
        await emulator.received.last { $0.target == token }?.message
    }

    /// Every message the emulator received for `token`, oldest first.
    func messages(to token: String) async -> [[String: Any]] {
        await emulator.received.filter { $0.target == token }.compactMap(\.message)
    }
}

extension WorkerFixture {
    /// A real producer: a role of its own that logs in as itself, granted app `shop` (a
    /// superuser's `SET ROLE` would not do, since `herald.acts_for` checks `session_user`).
    /// A connection as a login of `herald_daemon`, the role production runs the daemon as.
    func daemonConnection() async throws -> PostgresConnection {
        let login = "daemon_\(database.name.suffix(8))"
        try await db.execute("CREATE ROLE \(login) LOGIN IN ROLE herald_daemon")
        return try await PostgresConnection.connect("\(database.conninfo) user=\(login)")
    }

    func producer() async throws -> PostgresConnection {
        let login = "producer_\(database.name.suffix(8))"
        try await db.execute(
            """
            CREATE ROLE \(login) LOGIN IN ROLE herald_producer;
            INSERT INTO herald.producer_apps (producer, app_id) VALUES ('\(login)', 'shop');
            """)
        return try await PostgresConnection.connect("\(database.conninfo) user=\(login)")
    }
}
