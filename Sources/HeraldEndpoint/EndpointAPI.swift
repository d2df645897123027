import Foundation
import HeraldCore
import HeraldPostgres
import HeraldStatus
import Hummingbird
import Logging
import Metrics
import NIOCore
import Prometheus
import Synchronization

/// The endpoint's routes, over the SQL functions of `migrations/functions/reconcile.sql`.
final class EndpointAPI: Sendable {
    let connections: [PostgresConnection]
    let settings: Endpoint.Settings
    let logger: Logger
    private let next = Atomic<Int>(0)
    /// Each receipt key file's bytes, and when they were read.
    let receiptKeys = Mutex<[String: (key: [UInt8], readAt: ContinuousClock.Instant)]>([:])

    init(connections: [PostgresConnection], settings: Endpoint.Settings, logger: Logger) {
        self.connections = connections
        self.settings = settings
        self.logger = logger
    }

    enum SQL {
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
        router.post("v1/receipts/:provider/:app") { request, context in
            await self.receipts(
                request, provider: context.parameters.get("provider") ?? "", app: context.parameters.get("app") ?? "")
        }
    }

    /// 200 while the daemon reaches a server that takes writes, 503 otherwise (asked of the
    /// server itself, which a pooler in front cannot hide). On the private metrics address it
    /// adds the daemon's view of its database (`server`, `writable`, `reconnects`, and while it
    /// has no writable server, for how long and why); the app address, which apps reach, names
    /// no internal host and repeats no database error.
    func health() async -> Response {
        let connection = self.connection
        let writable = try? await !connection.query(PostgresConnection.readOnlyTest)[0].decode(0, as: Bool.self)
        let status =
            switch writable {
            case true?: "ok"
            case false?: "database read-only"
            case nil: "database unavailable"
            }
        let code: HTTPResponse.Status = writable == true ? .ok : .serviceUnavailable
        guard case .metrics = settings.routes, let link = connection.link?.snapshot else {
            return Self.json(code, ["status": status])
        }
        var database: [String: Any] = ["writable": link.writable, "reconnects": link.reconnects]
        database["server"] = link.server
        if !link.writable {
            database["unwritable_seconds"] = Int(link.unwritableFor.components.seconds)
            database["problem"] = link.problem
        }
        return Self.json(code, ["status": status, "database": database])
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
        if let status = try? await StatusReport.loadQueues(connection) {
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
        if let refusal = Self.controlCharacterRefusal(
            [("reference", reference), ("kind", fields.kind), ("device_id", fields.device_id)])
        {
            return Self.json(.badRequest, ["outcome": "invalid_field", "message": refusal])
        }
        do {
            let row = try await connection.query(
                SQL.report, [reference, fields.kind ?? "delivered", fields.device_id])[0]
            let outcome: String = try row.decode("outcome")
            return Self.json(
                Self.status(of: outcome), ["outcome": outcome, "message": try row.decode("message", as: String.self)])
        } catch {
            let (status, message) = failure(error, route: "report")
            let outcome =
                status == .badRequest ? "invalid_value" : status == .serviceUnavailable ? "unavailable" : "error"
            return Self.json(status, ["outcome": outcome, "message": message])
        }
    }

    /// How a failed query is answered. A value PostgreSQL refuses (SQLSTATE class 22, data
    /// exception, or 23, integrity constraint violation; the Postgres layer's refusal of a NUL
    /// carries 22021) is the request's fault: 400, with PostgreSQL's words, which name the value's
    /// problem and hold nothing but what the request sent. A failure that is not about the
    /// request (``PostgresError/isTransient``: a database unreachable, shutting down, overloaded,
    /// read-only in a failover, or that cancelled the query or rolled back its transaction) is
    /// 503: retrying later can succeed. Anything else is Herald's own failure (a schema that does
    /// not match, a row it cannot read): 500, logged, and answered without details.
    func failure(_ error: any Error, route: String) -> (HTTPResponse.Status, String) {
        let postgres = error as? PostgresError
        if let postgres, ["22", "23"].contains(postgres.sqlStateClass) {
            return (.badRequest, "the database refused a value of this request: \(postgres.message.prefix(200))")
        }
        if postgres?.isTransient == true {
            return (.serviceUnavailable, "the database is unavailable; retry")
        }
        logger.error("endpoint request failed", metadata: ["route": "\(route)", "error": "\(error)"])
        return (.internalServerError, "Herald failed to answer this request; its log says why")
    }

    /// Why one of `fields` is refused, or nil: a control character (NUL, newline, escape, …)
    /// has no place in a reference, kind or device id, and a NUL cannot reach PostgreSQL at all.
    static func controlCharacterRefusal(_ fields: [(name: String, value: String?)]) -> String? {
        for (name, value) in fields {
            guard let scalar = value?.unicodeScalars.first(where: { $0.properties.generalCategory == .control })
            else { continue }
            return "\(name) holds a control character (\(String(format: "U+%04X", scalar.value))): "
                + "send it without control characters"
        }
        return nil
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
        var since: Date?
        if let text = query["since"].map(String.init) {
            guard let date = Self.parseSince(text) else {
                return Self.json(
                    .badRequest, ["message": "since must be an ISO 8601 time such as 2026-11-20T08:00:00Z"])
            }
            guard Self.sinceRange.contains(date) else {
                return Self.json(
                    .badRequest,
                    [
                        "message":
                            "since must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z; "
                            + "leave it out to fetch the last 3 days"
                    ])
            }
            since = date
        }
        var limit: Int?
        if let text = query["limit"].map(String.init) {
            guard let value = Int(text), (1...100).contains(value) else {
                return Self.json(.badRequest, ["message": "limit must be a whole number from 1 to 100"])
            }
            limit = value
        }
        let device = query["device_id"].map(String.init)
        if let refusal = Self.controlCharacterRefusal([("reference", reference), ("device_id", device)]) {
            return Self.json(.badRequest, ["message": refusal])
        }
        do {
            let rows = try await connection.query(SQL.pending, [reference, since, limit, device])
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            headers[.cacheControl] = "no-store"
            return Response(
                status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: try rows[0].decode(0))))
        } catch let error as PostgresError where error.sqlState == "28000" {
            return Self.json(.forbidden, ["message": error.message])
        } catch {
            let (status, message) = failure(error, route: "pending")
            return Self.json(status, ["message": message])
        }
    }

    /// `since` as an ISO 8601 (RFC 3339) time: `2026-11-20T08:00:00Z`, with fractional seconds or
    /// an offset (`+02:00`) if wanted; nil for anything else. Parsed here, strictly (ASCII digits,
    /// a four-digit year, a day that exists), rather than by `Date.ISO8601FormatStyle`, which
    /// takes `10000-01-01T00:00:00Z` for some time between 1970 and 9999.
    static func parseSince(_ text: String) -> Date? {
        guard
            let match = text.wholeMatch(
                of:
                    /([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))/
            )
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(
            year: Int(match.1), month: Int(match.2), day: Int(match.3), hour: Int(match.4), minute: Int(match.5),
            second: Int(match.6))
        guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else { return nil }
        let fraction = match.7.flatMap { Double("0" + $0) } ?? 0
        var offset = 0
        if let sign = match.8, let hours = match.9.flatMap({ Int($0) }), let minutes = match.10.flatMap({ Int($0) }) {
            guard hours < 24, minutes < 60 else { return nil }
            offset = (sign == "-" ? -1 : 1) * (hours * 3600 + minutes * 60)
        }
        return date.addingTimeInterval(fraction - Double(offset))
    }

    /// The `since` a fetch accepts. Refused outside it rather than clamped:
    /// `herald.pending_notifications` takes an explicit `since` as it is (only its default is
    /// `herald.fetch_window()`), so clamping a too-early one to the window would make
    /// `since=1969-12-31…` answer less than `since=1970-01-01…`; and a time before 1970 or past
    /// 9999 is an app's bug (an unset clock, a zero value) that it should hear of. Within the
    /// range the value is bound as the parsed Date, so PostgreSQL reads the instant checked
    /// here, not its own reading of the text (which would take year 0 as an error and words
    /// like `epoch` or `now` as times).
    static let sinceRange = Date(timeIntervalSince1970: 0)...Date(timeIntervalSince1970: 253_402_300_799.999_999)

    /// Why a body was not read.
    struct Refusal: Error {
        var response: Response
    }

    /// The body, unless it is over `limit` bytes (413; the settings' `maxBodyBytes` unless said)
    /// or too slow to arrive (408).
    func readBody(_ request: Request, limit: Int? = nil) async -> Result<ByteBuffer, Refusal> {
        let limit = limit ?? settings.maxBodyBytes
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

    static func json(_ status: HTTPResponse.Status, _ fields: [String: Any], close: Bool = false) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if close { headers[.connection] = "close" }
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
