import Foundation
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// A migrated database with app `shop`, the emulator holding its service account, and the
/// workers' context, for tests that send. With `webPush`, the emulator's push service is
/// reachable over TLS and HTTP/2 through nginx, and `shop` has a VAPID key.
struct WorkerFixture {
    let emulator: FCMEmulator
    let db: PostgresConnection
    let database: TestDatabase
    let context: WorkerContext
    let queue: JobQueue
    /// Kept for the fixture's lifetime: the app's credentials file.
    let accountFile: ServiceAccountFile
    /// The push service's TLS front, and the app's VAPID key, when made `webPush`.
    let pushService: NginxStandIn?
    let vapid: VAPIDKeyFile?

    static func make(clock: any WallClock = SystemClock(), webPush: Bool = false) async throws -> WorkerFixture {
        let emulator = try await FCMEmulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "shop-prod")
        let accountFile = try ServiceAccountFile(account)
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.query(
            "INSERT INTO herald.apps (app_id, fcm_project_id, credentials_file) VALUES ('shop', 'shop-prod', $1)",
            [accountFile.path])
        var http = HTTPClient.Configuration()
        var pushService: NginxStandIn?
        var vapid: VAPIDKeyFile?
        if webPush {
            let front = try NginxStandIn(upstream: emulator.port)
            let key = try VAPIDKeyFile()
            try await db.query(
                "UPDATE herald.apps SET vapid_key_file = $1, vapid_subject = 'mailto:push@shop.example'", [key.path])
            http.caBundle = front.caBundle
            (pushService, vapid) = (front, key)
        }
        var fcm = Senders.Configuration()
        fcm.endpoint = emulator.baseURL
        let context = WorkerContext(
            connection: db, clock: clock, logger: Logger(label: "test"),
            senders: Senders(http: HTTPClient(configuration: http), configuration: fcm, logger: Logger(label: "test")))
        return WorkerFixture(
            emulator: emulator, db: db, database: database, context: context,
            queue: JobQueue(connection: db, workerID: "test", clock: clock), accountFile: accountFile,
            pushService: pushService, vapid: vapid)
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

    func message(to token: String) async -> [String: Any]? {
        await emulator.received.last { $0.target == token }?.message
    }

    /// Every message the emulator received for `token`, oldest first.
    func messages(to token: String) async -> [[String: Any]] {
        await emulator.received.filter { $0.target == token }.compactMap(\.message)
    }
}
