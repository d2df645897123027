import ArgumentParser
import Foundation
import HeraldCrypto
import HeraldEndpoint
import HeraldHTTP
import HeraldPostgres
import HeraldSchema
import HeraldWorkers
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// `herald-bench receipts`: how many provider receipts the endpoint takes a second, and what each
/// costs. On an empty database (it truncates Herald's tables) it makes `count` sent Push Kit
/// deliveries, then, round after round, posts a receipt for each as Push Kit does (V1, `perPost`
/// statuses a post, signed, from `posters` connections at once) to an endpoint in this process
/// with the daemon's two connections, and prints receipts a second, the process's CPU a receipt
/// (the endpoint's and the posters'), and PostgreSQL's (every postgres process on this machine,
/// from /proc: run it with nothing else on the server).
struct ReceiptsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts", abstract: "Provider receipts the endpoint takes a second, and their cost.")

    @OptionGroup var options: CommonOptions
    @Option(help: "Sent deliveries, a receipt each per round.") var count = 20_000
    @Option(help: "Statuses a post (Push Kit merges up to 100).") var perPost = 100
    @Option(help: "Posts in flight at once.") var posters = 4
    @Option(help: "Rounds.") var rounds = 3

    func run() async throws {
        let configuration = try options.load()
        let db = try await PostgresConnection.connect(configuration.databaseURL)
        try await Migrator(logger: Logger(label: "bench")).migrate(db)
        try await db.execute(
            "TRUNCATE herald.jobs, herald.deliveries, herald.notifications, herald.devices, herald.apps CASCADE")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("herald-bench-receipts-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let keyFile = folder.appendingPathComponent("receipts.key")
        let secretFile = folder.appendingPathComponent("hms.secret")
        try Data(key.utf8).write(to: keyFile)
        try Data("secret".utf8).write(to: secretFile)
        try await db.query("INSERT INTO herald.apps (app_id) VALUES ('bench')")
        try await db.query(
            """
            INSERT INTO herald.app_hms (app_id, client_id, client_secret_file, receipt_username, receipt_key_file)
            VALUES ('bench', '1234567', $1, 'bench', $2)
            """, [secretFile.path, keyFile.path])
        try await db.query(
            """
            INSERT INTO herald.devices (app_id, device_id, platform, push_token, user_ref, token_kind)
            SELECT 'bench', 'device-' || n, 'android', 'ANDmbp0J' || lpad(n::text, 40, '0'), 'user-' || n, 'hms_token'
            FROM generate_series(1, $1) AS n
            """, [count])
        try await db.query(
            "SELECT herald.send('bench', user_ref => 'user-' || n, title => 'Hello') FROM generate_series(1, $1) n",
            [count])
        while try await db.query("SELECT accepted + no_devices FROM herald.ingest_next(1000)")[0].decode(
            0, as: Int.self) > 0
        {}
        try await db.query(
            """
            UPDATE herald.deliveries SET state = 'sent', sent_at = now(), run_at = NULL, attempts = 1,
                   provider_message_id = 'req' || id
            """)
        let sent = try await db.query(
            """
            SELECT d.id, v.push_token FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id ORDER BY d.id
            """
        ).map { (try $0.decode(0, as: Int64.self), try $0.decode(1, as: String.self)) }

        let (ports, listening) = AsyncStream<Int>.makeStream()
        var settings = Endpoint.Settings(host: "127.0.0.1", port: 0)
        settings.maxConnections = posters * 2
        settings.receiptReaders = ProviderReceipts.readers
        let endpoint = Endpoint(
            settings: settings,
            connections: [
                try await PostgresConnection.connect(configuration.databaseURL),
                try await PostgresConnection.connect(configuration.databaseURL),
            ],
            logger: Logger(label: "bench"), onListening: { listening.yield($0) })
        let server = Task { try await endpoint.run() }
        defer { server.cancel() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw ValidationError("the endpoint did not start") }
        let url = "http://127.0.0.1:\(port)/v1/receipts/hms/bench"
        let http = HTTPClient()
        let keyBytes = [UInt8](Data(base64Encoded: key)!)
        print("receipts: \(count) sent Push Kit deliveries, \(perPost) statuses a post, \(posters) posts at once")
        for round in 1...rounds {
            try await db.query("UPDATE herald.deliveries SET receipt = NULL, receipt_reason = NULL, receipt_at = NULL")
            let millis = Int64(Date().timeIntervalSince1970 * 1000)
            let posts = stride(from: 0, to: sent.count, by: perPost).map { start -> HTTPRequest in
                let statuses = sent[start..<min(sent.count, start + perPost)].map { id, token in
                    #"{"token":"\#(token)","biTag":"herald-\#(id)","requestId":"req\#(id)","status":0,"timestamp":\#(millis),"appid":"1234567"}"#
                }
                let nonce = UUID().uuidString.lowercased()
                let value = Data(HMAC.sha256(key: keyBytes, [UInt8]("\(millis)\(nonce)bench".utf8)))
                    .base64EncodedString()
                return HTTPRequest(
                    method: "POST", url: url,
                    headers: [
                        ("Content-Type", "application/json"),
                        ("X-HUAWEI-CALLBACK-ID", "timestamp=\(millis); nonce=\(nonce); value=\(value)"),
                    ],
                    body: [UInt8](#"{"statuses":[\#(statuses.joined(separator: ","))]}"#.utf8))
            }
            let cpuBefore = processCPU()
            let databaseBefore = Self.postgresCPU()
            let started = ContinuousClock.now
            let refused = try await withThrowingTaskGroup(of: Int.self) { group in
                var next = 0
                var refused = 0
                for _ in 0..<min(posters, posts.count) {
                    let post = posts[next]
                    next += 1
                    group.addTask { try await http.send(post).status == 200 ? 0 : 1 }
                }
                while let one = try await group.next() {
                    refused += one
                    if next < posts.count {
                        let post = posts[next]
                        next += 1
                        group.addTask { try await http.send(post).status == 200 ? 0 : 1 }
                    }
                }
                return refused
            }
            let seconds = (ContinuousClock.now - started).seconds
            let cpu = processCPU() - cpuBefore
            let database = Self.postgresCPU() - databaseBefore
            let recorded = try await db.query("SELECT count(*) FROM herald.deliveries WHERE receipt = 'delivered'")[0]
                .decode(0, as: Int.self)
            print(
                String(
                    format:
                        "round %d: %.0f receipts/s (%d recorded, %d posts refused); CPU a receipt: this process %.0f µs, PostgreSQL %.0f µs",
                    round, Double(sent.count) / seconds, recorded, refused, cpu / Double(sent.count) * 1e6,
                    database / Double(sent.count) * 1e6))
        }
    }

    /// The CPU time, in seconds, of every process named postgres (the server's backends, on this
    /// machine), from /proc/<pid>/stat.
    static func postgresCPU() -> Double {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var total = 0.0
        for pid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int(pid) != nil {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")"), stat.contains("(postgres)")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // utime and stime: the 14th and 15th fields, the 12th and 13th after the name.
            if fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) {
                total += (user + system) / ticks
            }
        }
        return total
    }
}
