import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP endpoint of a running `herald run`, called with curl and a raw socket, as apps
/// and misbehaving clients would.
@Suite struct EndpointProcessTests {
    struct Running {
        let daemon: HeraldProcess
        let port: Int
        var base: String { "http://127.0.0.1:\(port)" }
    }

    /// An iOS device with three notifications sent ten minutes ago and never reported, and the daemon serving them.
    func start(_ database: TestDatabase, _ db: PostgresConnection) async throws -> Running {
        try await db.addApp("shop", fcmProject: "shop-prod")
        try await db.query("SELECT herald.register_device('shop', 'iphone', 'ios', 'token-iphone')")
        try await db.query("SELECT herald.register_device('shop', 'pixel', 'android', 'token-pixel')")
        try await db.query(
            """
            WITH n AS (
                INSERT INTO herald.notifications (app_id, device_ids, title, body, data, state, ingested_at, expires_at)
                SELECT 'shop', '{iphone}', 'Order ' || i, 'Body ' || i, ('{"order": "' || i || '"}')::jsonb, 'accepted', now(),
                       now() + interval '1 day'
                FROM generate_series(1, 3) AS i RETURNING id, title)
            INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, state, sent_at)
            SELECT n.id, dev.id, 'ios_alert', 'sent', now() - interval '10 minutes' + n.id * interval '1 second'
            FROM n, herald.devices dev WHERE dev.device_id = 'iphone'
            """)
        let daemon = try HeraldProcess(
            ["run"],
            environment: [
                "HERALD_DATABASE_URL": database.conninfo, "HERALD_HTTP_TIMEOUT": "1s", "HERALD_POLL_INTERVAL": "200ms",
                "HERALD_FCM_ENDPOINT": "http://127.0.0.1:9",
            ])
        var port: Int?
        _ = await eventually(timeout: .seconds(20)) {
            port = daemon.output.firstMatch(of: /HTTP endpoint listening address=127\.0\.0\.1:(\d+) routes=app/)
                .flatMap { Int($0.1) }
            return port != nil
        }
        return Running(daemon: daemon, port: try #require(port, "\(daemon.output)"))
    }

    func references(_ db: PostgresConnection) async throws -> [String] {
        try await db.query(
            "SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries ORDER BY id"
        ).map { try $0.decode(0) }
    }

    /// Runs curl; returns the HTTP status and the body.
    func curl(_ arguments: [String], input: Data? = nil) async throws -> (status: Int, body: String) {
        let text = try await runProgram(
            "/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "--max-time", "30"] + arguments, input: input
        ).output
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    @Test func appsReportAndFetchOverHTTP() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let running = try await start(database, db)
        let references = try await references(db)

        #expect(try await curl([running.base + "/healthz"]).status == 200)
        #expect(try await curl([running.base + "/admin"]).status == 404)

        // The app reports the newest; a repeat, a forgery and another device's claim change nothing.
        let report = { (reference: String, body: String) in
            try await curl([
                "-X", "POST", "-H", "Content-Type: application/json", "-d", body,
                "\(running.base)/v1/reports/\(reference)",
            ])
        }
        let accepted = try await report(references[2], #"{"device_id": "iphone"}"#)
        #expect(accepted.status == 202)
        #expect(json(accepted.body)["outcome"] as? String == "accepted")
        let replay = try await report(references[2], "{}")
        #expect(replay.status == 409)
        #expect(
            json(replay.body)["message"] as? String == "this delivery was already reported delivered; nothing changed")
        var forged = Array(references[1])
        forged[3] = forged[3] == "x" ? "y" : "x"
        let forgery = try await report(String(forged), "{}")
        #expect(forgery.status == 403)
        #expect(json(forgery.body)["outcome"] as? String == "invalid_reference")
        #expect(try await report(references[1], #"{"device_id": "pixel"}"#).status == 403)
        #expect(try await report(references[1], "not json").status == 400)
        #expect(try await report(references[1], #"{"kind": "clicked"}"#).status == 400)

        // The daemon's reconcile worker applies the accepted report.
        #expect(
            try await eventually {
                try await db.query("SELECT count(*) FROM herald.deliveries WHERE state = 'delivered'")[0].decode(
                    0, as: Int.self) == 1
            }, "\(running.daemon.output)")

        // The pending fetch: the two it missed, newest first, each with a reference to report it by.
        let pending = try await curl(["\(running.base)/v1/pending/\(references[2])?limit=10"])
        #expect(pending.status == 200)
        let items = try #require(json(pending.body)["notifications"] as? [[String: Any]], "\(pending.body)")
        let titles = items.map { $0["title"] as? String ?? "" }
        #expect(titles == ["Order 2", "Order 1"])
        let newest = try #require(items.first)
        #expect((newest["data"] as? [String: String]) == ["order": "2"])
        #expect(newest["reference"] as? String == references[1])
        #expect(try await curl(["\(running.base)/v1/pending/\(String(forged))"]).status == 403)
        #expect(try await curl(["\(running.base)/v1/pending/\(references[2])?limit=1000"]).status == 400)
        running.daemon.send(SIGTERM)
        #expect(await running.daemon.waitForExit(timeout: .seconds(60)))
    }

    @Test func oversizedAndSlowRequestsAreRefused() async throws {
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        let running = try await start(database, db)
        let reference = try await references(db)[0]
        let url = "\(running.base)/v1/reports/\(reference)"
        let big = Data(repeating: UInt8(ascii: "a"), count: 100_000)

        // Over the limit, by Content-Length or while streaming a chunked body: 413, nothing recorded.
        #expect(try await curl(["-X", "POST", "--data-binary", "@-", url], input: big).status == 413)
        #expect(
            try await curl(["-X", "POST", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-", url], input: big)
                .status
                == 413)

        // A body trickling in at 200 bytes a second is cut off after the 1 s timeout.
        let slowBody = try await curl(
            ["-X", "POST", "--limit-rate", "200", "--data-binary", "@-", url],
            input: Data(repeating: UInt8(ascii: " "), count: 3000))
        #expect(slowBody.status == 408)

        // A client that trickles its request head is disconnected after the timeout.
        let started = ContinuousClock.now
        let closed = try await SlowClient.trickle(
            "POST /v1/reports/\(reference) HTTP/1.1\r\nHost: herald\r\nX-Padding: "
                + String(repeating: "z", count: 200),
            to: running.port, every: .milliseconds(200))
        let elapsed = ContinuousClock.now - started
        #expect(closed, "the server kept a trickling client")
        // Trickling the whole head would take about a minute; a busy machine still closes far sooner.
        #expect(elapsed < .seconds(30))
        let reports = try await db.query("SELECT count(*) FROM herald.delivery_reports")[0].decode(0, as: Int.self)
        #expect(reports == 0)
        #expect(try await curl(["\(running.base)/healthz"]).status == 200, "the endpoint still serves others")
    }
}

/// A raw TCP client that sends a request a byte at a time.
enum SlowClient {
    /// Sends `text` one byte per `every`; returns true once the server closes the connection.
    static func trickle(_ text: String, to port: Int, every interval: Duration) async throws -> Bool {
        try await onOwnThread { try trickleBlocking(text, to: port, every: interval) }
    }

    private static func trickleBlocking(_ text: String, to port: Int, every interval: Duration) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 0, tv_usec: Int(interval.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 512)
        for byte in text.utf8 {
            var value = byte
            if send(fd, &value, 1, Int32(MSG_NOSIGNAL)) < 0 { return true }
            // recv waits up to `every`: 0 means the server closed the connection.
            let received = recv(fd, &buffer, buffer.count, 0)
            if received == 0 || (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { return true }
        }
        return false
    }
}
