import Foundation
import HeraldCore
import HeraldPostgres
import Hummingbird
import Logging
import NIOCore
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
/// twice that is closed.
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
            server: .http1(configuration: .init(idleTimeout: .nanoseconds(Int64(timeout.seconds * 2e9)))),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "herald"),
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
