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

    func start(_ adjust: (inout Endpoint.Settings) -> Void = { _ in }) async throws -> Running {
        let database = try await TestDatabase.create()
        let (ports, listening) = AsyncStream<Int>.makeStream()
        var settings = Endpoint.Settings(host: "127.0.0.1", port: 0)
        adjust(&settings)
        let endpoint = Endpoint(
            settings: settings, connections: [try await database.connect()],
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
            INSERT INTO herald.apps (app_id) VALUES ('shop');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('shop', 'shop');
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

    /// `since` must be a time both Herald and PostgreSQL read: anything else is the app's
    /// mistake (400, saying what to send), never "the database is unavailable".
    @Test func aSinceOutsideTheUsableRangeIsRefusedWithAReason() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let reference = try await sentNotification(endpoint.db)
        for since in [
            "0000-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z",
            "yesterday", "epoch", "2026-11-20", "2026-02-30T00:00:00Z", "2026-11-20T25:00:00Z",
            "2026-11-20T08:00:00", "2026-11-20T08:00:00+24:00", "2026-11-20T08:00:00Z%00",
        ] {
            let fetch = try await endpoint.request("GET", "/v1/pending/\(reference)?since=\(since)")
            #expect(fetch.status == 400, "\(since): \(fetch.status) \(fetch.bodyText)")
            #expect(fetch.bodyText.contains("since must be"), "\(since): \(fetch.bodyText)")
        }
        let early = try await endpoint.request("GET", "/v1/pending/\(reference)?since=1969-12-31T23:59:59Z")
        #expect(early.bodyText.contains("1970-01-01"), "\(early.bodyText)")
        // The ends of the range, and fractional seconds, are fine.
        for since in ["1970-01-01T00:00:00Z", "2000-01-01T00:00:00.250Z", "2000-01-01T02:00:00%2B02:00"] {
            let fetch = try await endpoint.request("GET", "/v1/pending/\(reference)?since=\(since)")
            #expect(fetch.status == 200, "\(since): \(fetch.bodyText)")
            #expect(fetch.bodyText.contains("Your order shipped"), "\(since): \(fetch.bodyText)")
        }
        let future = try await endpoint.request("GET", "/v1/pending/\(reference)?since=9999-12-31T23:59:59Z")
        #expect(future.status == 200, "\(future.bodyText)")
        #expect(!future.bodyText.contains("Your order shipped"), "\(future.bodyText)")
    }

    /// A device id, kind or reference holding NUL or another control character is refused,
    /// naming the field, instead of being cut at the NUL (which made `iphone\u0000…` the
    /// device `iphone`) or stored.
    @Test func controlCharactersInAnyFieldAreRefusedNamingIt() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let reference = try await sentNotification(endpoint.db)
        for (body, field) in [
            (#"{"kind": "delivered", "device_id": "iphone\u0000evil"}"#, "device_id"),
            (#"{"kind": "delivered", "device_id": "iphone\n"}"#, "device_id"),
            (#"{"kind": "deliv\u0000ered", "device_id": "iphone"}"#, "kind"),
            (#"{"kind": "delivered\u001b[2J"}"#, "kind"),
        ] {
            let report = try await endpoint.request("POST", "/v1/reports/\(reference)", body: body)
            #expect(report.status == 400, "\(body): \(report.status) \(report.bodyText)")
            #expect(report.bodyText.contains("invalid_field"), "\(report.bodyText)")
            #expect(report.bodyText.contains("\(field) holds a control character"), "\(report.bodyText)")
        }
        for (query, field) in [("device_id=iphone%00evil", "device_id"), ("device_id=%7F", "device_id")] {
            let fetch = try await endpoint.request("GET", "/v1/pending/\(reference)?\(query)")
            #expect(fetch.status == 400, "\(query): \(fetch.status) \(fetch.bodyText)")
            #expect(fetch.bodyText.contains("\(field) holds a control character"), "\(fetch.bodyText)")
        }
        let reports = try await endpoint.db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(
            0, as: Int.self)
        #expect(reports == 0)
        // The same report without the control character is accepted.
        let clean = try await endpoint.request(
            "POST", "/v1/reports/\(reference)", body: #"{"kind": "delivered", "device_id": "iphone"}"#)
        #expect(clean.status == 202, "\(clean.bodyText)")
    }

    /// A value the database refuses (SQLSTATE classes 22 and 23) is the request's fault: 400.
    /// Only a database that cannot be reached is 503; Herald's own failure is 500.
    @Test func databaseErrorsAreAnsweredByWhoseFaultTheyAre() async throws {
        let endpoint = try await start()
        defer { endpoint.server.cancel() }
        let reference = try await sentNotification(endpoint.db)
        // A rule of this database refuses seen reports: an integrity violation (23514).
        try await endpoint.db.execute(
            """
            ALTER TABLE herald.delivery_reports ADD CONSTRAINT no_seen_reports CHECK (report_kind <> 'seen')
            """)
        let refused = try await endpoint.request(
            "POST", "/v1/reports/\(reference)", body: #"{"kind": "seen", "device_id": "iphone"}"#)
        #expect(refused.status == 400, "\(refused.bodyText)")
        #expect(refused.bodyText.contains("invalid_value"), "\(refused.bodyText)")
        #expect(refused.bodyText.contains("no_seen_reports"), "\(refused.bodyText)")

        // A schema that lacks the fetch's function is Herald's failure, not the app's nor a retry's.
        try await endpoint.db.execute(
            """
            ALTER FUNCTION herald.pending_notifications(text, timestamptz, int, text) RENAME TO pending_elsewhere
            """)
        let broken = try await endpoint.request("GET", "/v1/pending/\(reference)")
        #expect(broken.status == 500, "\(broken.bodyText)")
        #expect(!broken.bodyText.contains("pending_notifications"), "\(broken.bodyText)")

        // The endpoint's session ends under it: the database is unavailable (once; then it reconnects).
        try await endpoint.db.execute(
            """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
            """)
        let lost = try await endpoint.request("GET", "/v1/pending/\(reference)")
        #expect(lost.status == 503, "\(lost.bodyText)")
        #expect(lost.bodyText.contains("unavailable"), "\(lost.bodyText)")
    }

    /// A keep-alive client on a plain socket, asking `GET /healthz` when told to. It waits on a
    /// thread of its own: the endpoint answers on the test's cooperative threads, two here, so
    /// a wait on one of them once starved the answer it waited for (and other suites' servers).
    final class KeptAlive: Sendable {
        let fd: Int32

        init(_ base: String) throws {
            let port = UInt16(try #require(URL(string: base)?.port))
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try #require(connected == 0)
        }

        deinit { close(fd) }

        /// The answer's head and body; nil when none came within `seconds`, "" once closed.
        func ask(within seconds: Int = 10) async throws -> String? {
            let request = Array("GET /healthz HTTP/1.1\r\nHost: herald\r\n\r\n".utf8)
            guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else { return "" }
            return try await read(within: seconds)
        }

        func read(within seconds: Int = 10) async throws -> String? {
            try await onOwnThread { self.readBlocking(within: seconds) }
        }

        private func readBlocking(within seconds: Int) -> String? {
            var wait = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK ? nil : "" }
            return String(decoding: buffer[..<count], as: UTF8.self)
        }
    }

    /// Idle clients cannot hold every descriptor (issue #40): a connection is closed once it
    /// has been open its lifetime, even one asking every half second (a request every 15 s
    /// once kept it forever), and connections past the cap wait in the backlog until one closes.
    @Test func connectionsAreCappedAndLiveNoLongerThanTheirLifetime() async throws {
        let lifetime = Duration.seconds(4)
        let endpoint = try await start {
            $0.maxConnections = 2
            $0.connectionLifetime = lifetime
        }
        defer { endpoint.server.cancel() }
        let opened = ContinuousClock.now
        let first = try KeptAlive(endpoint.base)
        let second = try KeptAlive(endpoint.base)
        #expect(try await first.ask()?.hasPrefix("HTTP/1.1 200") == true)
        #expect(try await second.ask()?.hasPrefix("HTTP/1.1 200") == true)
        let third = try KeptAlive(endpoint.base)
        let unanswered = try await third.ask(within: 1)
        // (A machine so loaded that the first two already lived out their lifetime proves nothing.)
        if ContinuousClock.now - opened < lifetime - .seconds(1) {
            #expect(unanswered == nil, "past the cap, a connection waits unanswered")
        }

        // The first keeps asking; its lifetime ends it (and the second), and the third is taken in.
        // Counted in answers, not seconds: a loaded machine answers late, never more often.
        let pause = Duration.milliseconds(300)
        var answers = 0
        var closed = false
        while ContinuousClock.now - opened < .seconds(40) {
            var answer = try await first.ask()
            while answer == nil, ContinuousClock.now - opened < .seconds(40) { answer = try await first.read() }
            guard let answer, !answer.isEmpty else {
                closed = answer == ""
                break
            }
            answers += 1
            try await Task.sleep(for: pause)
        }
        #expect(closed, "closed at its lifetime, after \(answers) answers")
        #expect(answers <= Int(lifetime / pause) + 1, "no answers past its lifetime: \(answers)")
        var late = unanswered
        if late == nil { late = try await third.read() }
        #expect(late?.hasPrefix("HTTP/1.1 200") == true, "answered once a place freed: \(late ?? "nothing")")
    }
}
