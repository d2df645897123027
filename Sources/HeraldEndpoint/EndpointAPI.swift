import Foundation
import HeraldPostgres
import HeraldQueue
import Hummingbird
import Metrics
import NIOCore
import Prometheus
import Synchronization

/// The endpoint's routes, over the SQL functions of `migrations/007_reconcile.sql`.
final class EndpointAPI: Sendable {
    let connections: [PostgresConnection]
    let settings: Endpoint.Settings
    private let next = Atomic<Int>(0)

    init(connections: [PostgresConnection], settings: Endpoint.Settings) {
        self.connections = connections
        self.settings = settings
    }

    enum SQL {
        static let alive = "SELECT 1"
        static let appProblems = "SELECT app_id, scope FROM herald.app_problems"
        static let report = "SELECT accepted, outcome, message FROM herald.report_delivery($1, $2, $3)"
        static let pending = """
            SELECT json_build_object('notifications', coalesce(json_agg(json_build_object(
                       'id', notification_id::text, 'reference', report_reference, 'title', title, 'body', body,
                       'data', data, 'image_url', image_url, 'deep_link', deep_link, 'sent_at', sent_at)
                       ORDER BY sent_at DESC, notification_id DESC), '[]'))::text
            FROM herald.pending_notifications($1, coalesce($2::timestamptz, now() - herald.fetch_window()),
                                              coalesce($3::int, 20), $4)
            """
    }

    /// Each request takes the next connection, so a slow query holds up only its share.
    var connection: PostgresConnection {
        connections[next.add(1, ordering: .relaxed).oldValue % connections.count]
    }

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("healthz") { _, _ in await self.health() }
        if case .metrics(let registry) = settings.routes {
            router.get("metrics") { _, _ in await self.metrics(registry) }
            return
        }
        router.post("v1/reports/:reference") { request, context in
            await self.report(request, reference: context.parameters.get("reference") ?? "")
        }
        router.get("v1/pending/:reference") { request, context in
            await self.pending(request, reference: context.parameters.get("reference") ?? "")
        }
    }

    func health() async -> Response {
        do {
            _ = try await connection.query(SQL.alive)
            return Self.json(.ok, ["status": "ok"])
        } catch {
            return Self.json(.serviceUnavailable, ["status": "database unavailable"])
        }
    }

    /// Kinds whose queue gauges were set, so a kind whose jobs are all gone drops to zero.
    private let gaugedKinds = Mutex<Set<String>>(Set(WorkerKind.allCases.filter(\.isQueued).map(\.rawValue)))

    /// Apps and scopes whose problem gauge was set, so one that recovers drops to zero.
    private let gaugedApps = Mutex<Set<[String]>>([])

    /// Prometheus's text format. Queue gauges are read from `herald.queue_depth`, and app
    /// problems from `herald.app_problems`, at each scrape.
    func metrics(_ registry: PrometheusCollectorRegistry) async -> Response {
        if let rows = try? await connection.query(SQL.appProblems) {
            let failing = Set(
                rows.compactMap { row in
                    (try? row.decode("app_id", as: String.self)).flatMap { app in
                        (try? row.decode("scope", as: String.self)).map { [app, $0] }
                    }
                })
            let gauged = gaugedApps.withLock { known in
                known.formUnion(failing)
                return known
            }
            for key in gauged {
                Gauge(label: "herald_app_config_error", dimensions: [("app", key[0]), ("scope", key[1])]).record(
                    failing.contains(key) ? 1 : 0)
            }
        }
        if let status = try? await QueueStatus.loadQueues(connection) {
            let depth = Dictionary(uniqueKeysWithValues: status.kinds.map { ($0.kind, $0) })
            let kinds = gaugedKinds.withLock { known in
                known.formUnion(depth.keys)
                return known
            }
            for kind in kinds {
                let queue = depth[kind]
                for (state, count) in [
                    ("ready", queue?.ready), ("scheduled", queue?.scheduled), ("running", queue?.running),
                    ("lease_expired", queue?.leaseExpired), ("dead", queue?.dead),
                ] {
                    Gauge(label: "herald_queue_jobs", dimensions: [("kind", kind), ("state", state)]).record(count ?? 0)
                }
                Gauge(label: "herald_queue_oldest_ready_seconds", dimensions: [("kind", kind)])
                    .record(queue?.oldestReadySeconds ?? 0)
            }
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(
            status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }

    struct ReportBody: Decodable {
        var kind: String?
        var device_id: String?
    }

    func report(_ request: Request, reference: String) async -> Response {
        let body: ByteBuffer
        switch await readBody(request) {
        case .success(let bytes): body = bytes
        case .failure(let refusal): return refusal.response
        }
        var fields = ReportBody()
        if body.readableBytes > 0 {
            do {
                fields = try JSONDecoder().decode(ReportBody.self, from: Data(buffer: body))
            } catch {
                return Self.json(
                    .badRequest,
                    [
                        "outcome": "invalid_body",
                        "message": #"the body must be JSON like {"kind": "delivered", "device_id": "…"}"#,
                    ])
            }
        }
        do {
            let row = try await connection.query(
                SQL.report, [reference, fields.kind ?? "delivered", fields.device_id])[0]
            let outcome: String = try row.decode("outcome")
            return Self.json(
                Self.status(of: outcome), ["outcome": outcome, "message": try row.decode("message", as: String.self)])
        } catch {
            return Self.json(
                .serviceUnavailable, ["outcome": "unavailable", "message": "the database is unavailable; retry"])
        }
    }

    /// How each outcome of `herald.report_delivery` is answered.
    static func status(of outcome: String) -> HTTPResponse.Status {
        switch outcome {
        case "accepted": return .accepted
        case "already_reported": return .conflict
        case "invalid_reference", "wrong_device": return .forbidden
        case "unknown_delivery": return .notFound
        default: return .badRequest
        }
    }

    func pending(_ request: Request, reference: String) async -> Response {
        let query = request.uri.queryParameters
        var since: String?
        if let text = query["since"].map(String.init) {
            guard (try? Date.ISO8601FormatStyle().parse(text)) != nil else {
                return Self.json(
                    .badRequest, ["message": "since must be an ISO 8601 time such as 2026-11-20T08:00:00Z"])
            }
            since = text
        }
        var limit: Int?
        if let text = query["limit"].map(String.init) {
            guard let value = Int(text), (1...100).contains(value) else {
                return Self.json(.badRequest, ["message": "limit must be a whole number from 1 to 100"])
            }
            limit = value
        }
        do {
            let rows = try await connection.query(
                SQL.pending, [reference, since, limit, query["device_id"].map(String.init)])
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            headers[.cacheControl] = "no-store"
            return Response(
                status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: try rows[0].decode(0))))
        } catch let error as PostgresError where error.sqlState == "28000" {
            return Self.json(.forbidden, ["message": error.message])
        } catch {
            return Self.json(.serviceUnavailable, ["message": "the database is unavailable; retry"])
        }
    }

    /// Why a body was not read.
    struct Refusal: Error {
        var response: Response
    }

    /// The body, unless it is too large (413) or too slow to arrive (408).
    func readBody(_ request: Request) async -> Result<ByteBuffer, Refusal> {
        let limit = settings.maxBodyBytes
        let tooLarge = Refusal(
            response: Self.json(
                .contentTooLarge, ["outcome": "too_large", "message": "the body is over \(limit) bytes"], close: true))
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            return .failure(tooLarge)
        }
        let timeout = settings.timeout
        do {
            return .success(
                try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
                    group.addTask { try await request.body.collect(upTo: limit) }
                    group.addTask {
                        try await Task.sleep(for: timeout)
                        return nil
                    }
                    let first = try await group.next()!
                    group.cancelAll()
                    guard let body = first else { throw RequestTimedOut() }
                    return body
                })
        } catch is NIOTooManyBytesError {
            return .failure(tooLarge)
        } catch {
            return .failure(
                Refusal(
                    response: Self.json(
                        .requestTimeout, ["outcome": "timeout", "message": "the body took too long to arrive"],
                        close: true)))
        }
    }

    struct RequestTimedOut: Error {}

    static func json(_ status: HTTPResponse.Status, _ fields: [String: String], close: Bool = false) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if close { headers[.connection] = "close" }
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
