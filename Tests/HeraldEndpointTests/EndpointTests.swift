import Foundation
import HeraldCrypto
import HeraldEndpoint
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Logging
import Testing

/// The endpoint in this process, on a fresh database, answering a real HTTP client.
@Suite struct EndpointTests {
    struct Running {
        let base: String
        let server: Task<Void, any Error>
        let db: PostgresConnection
        let client = HTTPClient()

        func request(_ method: String, _ path: String, body: String = "") async throws -> HTTPResponse {
            try await client.send(
                HTTPRequest(
                    method: method, url: base + path, headers: [("content-type", "application/json")],
                    body: Array(body.utf8)))
        }
    }

    func start() async throws -> Running {
        let database = try await TestDatabase.create()
        let (ports, listening) = AsyncStream<Int>.makeStream()
        let endpoint = Endpoint(
            settings: .init(host: "127.0.0.1", port: 0), connections: [try await database.connect()],
            logger: Logger(label: "test"), onListening: { listening.yield($0) })
        let server = Task { try await endpoint.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        return Running(base: "http://127.0.0.1:\(port)", server: server, db: try await database.connect())
    }

    /// A notification sent to one iPhone; returns the reference its payload carried.
    func sentNotification(_ db: PostgresConnection) async throws -> String {
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id, fcm_project_id) VALUES ('shop', 'shop');
            SELECT herald.register_device('shop', 'iphone', 'ios', 'token-iphone', 'alice');
            SELECT herald.send('shop', user_ref => 'alice', title => 'Your order shipped');
            SELECT herald.ingest_next(10);
            UPDATE herald.deliveries SET state = 'sent', sent_at = now() - interval '5 minutes', run_at = NULL;
            """)
        let row = try await db.query(
            """
            SELECT d.id, d.device_id, s.value FROM herald.deliveries d, herald.secrets s WHERE s.name = 'report_hmac'
            """)[0]
        let reference = DeliveryReference(secret: [UInt8](try row.decode(2, as: Data.self)))
        return reference.make(deliveryID: try row.decode(0), deviceID: try row.decode(1))
    }

    @Test func healthSaysTheDatabaseAnswers() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let health = try await endpoint.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(health.bodyText.contains(#""status":"ok""#))
    }

    @Test func anAppFetchesWhatItMissedAndReportsItOnce() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let reference = try await sentNotification(endpoint.db)

        let pending = try await endpoint.request("GET", "/v1/pending/\(reference)")
        #expect(pending.status == 200)
        #expect(pending.bodyText.contains("Your order shipped"), "\(pending.bodyText)")

        let report = try await endpoint.request("POST", "/v1/reports/\(reference)", body: #"{"kind": "delivered"}"#)
        #expect(report.status == 202, "\(report.bodyText)")
        let again = try await endpoint.request("POST", "/v1/reports/\(reference)", body: #"{"kind": "delivered"}"#)
        #expect(again.status == 409, "\(again.bodyText)")
        #expect(again.bodyText.contains("already_reported"))
        // The report is kept, once, and handed to the reconcile worker.
        let kept = try await endpoint.db.query(
            """
            SELECT (SELECT count(*) FROM herald.delivery_reports),
                   (SELECT count(*) FROM herald.jobs WHERE kind = 'reconcile')
            """)[0]
        #expect(try kept.decode(0, as: Int.self) == 1)
        #expect(try kept.decode(1, as: Int.self) == 1)
    }

    @Test func forgedReferencesAndBadBodiesAreRefusedWithAReason() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let reference = try await sentNotification(endpoint.db)
        var forged = Array(reference)
        forged[forged.count - 2] = forged[forged.count - 2] == "A" ? "B" : "A"

        let report = try await endpoint.request(
            "POST", "/v1/reports/\(String(forged))", body: #"{"kind": "delivered"}"#)
        #expect(report.status == 403, "\(report.bodyText)")
        #expect(report.bodyText.contains("invalid_reference"))
        let fetch = try await endpoint.request("GET", "/v1/pending/\(String(forged))")
        #expect((400..<500).contains(fetch.status), "\(fetch.bodyText)")

        let notJSON = try await endpoint.request("POST", "/v1/reports/\(reference)", body: "delivered")
        #expect(notJSON.status == 400)
        #expect(notJSON.bodyText.contains("invalid_body"))
        // Nothing was recorded by the refused requests.
        let reports = try await endpoint.db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(
            0, as: Int.self)
        #expect(reports == 0)
    }
}
