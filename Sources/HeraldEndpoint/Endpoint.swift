import Foundation
import HeraldCore
import HeraldPostgres
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Prometheus
import ServiceLifecycle

/// Herald's small HTTP endpoints, part of `herald run`. The app endpoint: apps report
/// deliveries and fetch the notifications they missed; load balancers check health.
///
///     POST /v1/reports/{reference}   body (optional): {"kind": "seen", "device_id": "phone-1"}
///     GET  /v1/pending/{reference}?since=2026-11-20T00:00:00Z&limit=20&device_id=phone-1
///     GET  /healthz
///
/// The metrics endpoint, for Prometheus, on its own (private) address:
///
///     GET  /metrics
///     GET  /healthz
///
/// Nothing else is served.
///
/// Every value a request carries may be hostile, and only ever fails that request: a field
/// holding a control character (NUL included), a `since` outside 1970–9999, or a value the
/// database refuses (SQLSTATE class 22 or 23) is answered 400 with what to fix. 503 means
/// the database is unreachable or overloaded just now (retry later); 500, that Herald
/// itself failed (logged).
///
/// Bounded: bodies over ``Settings/maxBodyBytes`` are refused with 413 (unread when
/// Content-Length says so); a body that takes longer than ``Settings/timeout`` to arrive gets
/// 408, and a connection that completes no part of a request (a head that never ends) for
/// twice that is closed. At most ``Settings/maxConnections`` connections are open at once
/// (more wait in the listen backlog, holding no descriptor of Herald's), and none stays open
/// longer than ``Settings/connectionLifetime``: a client that sends a request every 15 s is
/// closed all the same, so idle clients cannot hold every descriptor the process has.
public struct Endpoint: Service {
    /// Which routes an endpoint serves.
    public enum Routes: Sendable {
        case app
        case metrics(PrometheusCollectorRegistry)
    }

    public struct Settings: Sendable {
        public var routes: Routes = .app
        public var host: String
        public var port: Int
        public var timeout: Duration = .seconds(10)
        public var maxBodyBytes = 4096
        /// The largest post of a provider's receipts: Push Kit merges up to 1000 statuses in one.
        public var maxReceiptBytes = 1 << 20
        /// The time receipts' signatures are checked against.
        public var clock: any WallClock = SystemClock()
        /// The providers whose receipts it takes (`/v1/receipts/{provider}/…`): none unless given;
        /// the daemon gives every provider's (`ProviderReceipts.readers`).
        public var receiptReaders: [any ReceiptReader] = []
        /// The most connections open at once: a quarter of the process's file descriptors
        /// (`RLIMIT_NOFILE`), at most 4096, so the database, the push services and the files
        /// always have the rest.
        public var maxConnections = Endpoint.defaultMaxConnections()
        /// How long a connection may stay open, however busy: past it, it is closed once its
        /// request in progress is answered (with `Connection: close`), or at once when idle.
        public var connectionLifetime: Duration = .seconds(60)

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    let settings: Settings
    let api: EndpointAPI
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    /// `connections` serve the requests in turn; `onListening` gets the bound port (useful with port 0).
    public init(
        settings: Settings, connections: [PostgresConnection], logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        precondition(!connections.isEmpty, "the endpoint needs a database connection")
        self.settings = settings
        self.api = EndpointAPI(connections: connections, settings: settings, logger: logger)
        self.logger = logger
        self.onListening = onListening
    }

    public func run() async throws {
        let router = Router(context: BasicRequestContext.self)
        api.addRoutes(to: router)
        let timeout = settings.timeout
        // Hummingbird announces itself at info; the line above says the same with the routes.
        var quieter = logger
        quieter.logLevel = max(logger.logLevel, .notice)
        let app = Application(
            router: router,
            // Idle means no complete part of a request: a head that never finishes, or a body
            // stalled outright. Twice the timeout, so a trickling body meets the handler's
            // deadline first and is answered 408 rather than cut off.
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [ConnectionLifetime(settings.connectionLifetime)],
                    idleTimeout: .nanoseconds(Int64(timeout.seconds * 2e9)))),
            configuration: .init(
                address: .hostname(settings.host, port: settings.port), serverName: "herald",
                availableConnectionsDelegate: MaximumAvailableConnections(settings.maxConnections, logger: logger)),
            onServerRunning: { [logger, onListening, settings] channel in
                let port = channel.localAddress?.port ?? settings.port
                let name = if case .metrics = settings.routes { "metrics" } else { "app" }
                logger.info(
                    "HTTP endpoint listening", metadata: ["address": "\(settings.host):\(port)", "routes": "\(name)"])
                await onListening(port)
            },
            logger: quieter)
        // run(), not runService(): the daemon's service group owns signals and graceful shutdown.
        try await app.run()
    }
}

extension Endpoint {
    /// A quarter of the soft `RLIMIT_NOFILE`, from 16 to 4096.
    public static func defaultMaxConnections() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else {
            return 4096
        }
        return min(max(Int(limit.rlim_cur / 4), 16), 4096)
    }
}

/// Closes its connection once it has been open `lifetime`: at once when no request is in
/// progress, else after the response in progress, which says `Connection: close`.
final class ConnectionLifetime: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let lifetime: Duration
    var expired = false
    var inProgress = 0
    var timer: Scheduled<Void>?

    init(_ lifetime: Duration) { self.lifetime = lifetime }

    func handlerAdded(context: ChannelHandlerContext) {
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        timer = loop.scheduleTask(in: .nanoseconds(Int64(lifetime.seconds * 1e9))) { [self] in
            expired = true
            if inProgress == 0 { context.close(promise: nil) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { inProgress += 1 }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where expired:
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            inProgress -= 1
            guard expired, inProgress <= 0 else { return context.write(data, promise: promise) }
            context.writeAndFlush(data, promise: promise)
            context.close(promise: nil)
        default:
            context.write(data, promise: promise)
        }
    }
}
