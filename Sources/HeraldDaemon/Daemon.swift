import Foundation
import HeraldCore
import HeraldEndpoint
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldSchema
import HeraldWorkers
import Logging
import Prometheus
import ServiceLifecycle

/// `herald run`: waits for the database if it cannot be reached yet, checks the schema, then
/// runs the configured workers and the pruner until SIGTERM or SIGINT, when each worker
/// finishes the batch in hand and the process exits.
///
/// Connections: one per worker loop (`HERALD_CONCURRENCY` per worker), one briefly for the
/// schema check, one for pruning, one for LISTEN, one for drawing FCM's quota with the fleet, two
/// for the HTTP endpoint, one for metrics.
public struct Daemon {
    let configuration: Configuration
    let logger: Logger
    let clock: any WallClock
    /// Where swift-metrics records, when the process bootstrapped it with Prometheus.
    let metrics: PrometheusCollectorRegistry?
    /// What every connection of the daemon knows of the database, for `/healthz` and the metrics.
    let link: DatabaseLink

    public init(
        configuration: Configuration, logger: Logger, clock: any WallClock = SystemClock(),
        metrics: PrometheusCollectorRegistry? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.metrics = metrics
        self.link = DatabaseLink(logger: logger)
    }

    /// A new connection to the database, reporting to the daemon's link; its statements' waits
    /// bounded as `bounds` says (none for the listener's and the schema check's).
    private func connection(_ bounds: StatementBounds? = nil) -> PostgresConnection {
        PostgresConnection(
            conninfo: configuration.databaseURL, logger: logger, link: link, setup: bounds.map { [$0.setup] } ?? [])
    }

    public func run() async throws {
        let factories = try WorkerCatalog.factories(for: configuration.workers)
        // Every connection holds a descriptor: the soft limit (often 1024) is raised to the
        // hard one, and the app endpoint takes at most a quarter (Endpoint.Settings).
        logger.info("file descriptors", metadata: ["limit": "\(FileDescriptors.raiseLimit())"])
        try await waitForTheDatabase()

        let hub = WakeHub()
        // One HTTP/2 client, and each app's clients of its providers, shared by every sending
        // worker.
        var http = HTTPClient.Configuration()
        http.caBundle = configuration.caBundle
        var providers = Senders.Configuration()
        providers.set(
            FCMSettings(
                defaultCredentialsFile: configuration.defaultCredentialsFile, ratePerSecond: configuration.fcmRateLimit)
        )
        providers.endpoints = configuration.providerEndpoints
        if configuration.unifiedPush { providers.turnedOn.insert("HERALD_UNIFIEDPUSH") }
        let senders = Senders(
            http: HTTPClient(configuration: http, logger: logger), configuration: providers, logger: logger,
            quotaConnection: connection())
        // Ingest leases deliveries at birth to this daemon's dispatch when it runs both: about
        // one round of the dispatch loops' batches.
        let births =
            WorkerCatalog.includes(.ingest, names: configuration.workers)
                && WorkerCatalog.includes(.dispatch, names: configuration.workers)
            ? BirthLeases(
                capacity: configuration.batchSize * configuration.concurrency,
                queuePollInterval: configuration.pollInterval
            ) { hub.wake(kind: WorkerKind.dispatch.rawValue) } : nil
        var services: [any Service] = []
        var heartbeats: [Heartbeat] = []
        var kinds: [String] = []
        let heldApps = HeldApps()
        var settings = WorkerSettings()
        settings.reconcile = configuration.reconcile
        settings.retryInterval = configuration.rescueInterval
        settings.publicURL = configuration.publicURL
        for factory in factories {
            for _ in 0..<configuration.concurrency {
                var context = context(on: connection(.worker), senders: senders, births: births)
                context.heldApps = heldApps
                let worker = factory(context, settings)
                if !kinds.contains(worker.kind) {
                    kinds.append(worker.kind)
                    StatementBounds.countLockWaits(kind: worker.kind)
                }
                let runner = WorkerRunner(
                    worker: worker,
                    hub: hub,
                    configuration: .init(batchSize: configuration.batchSize, pollInterval: configuration.pollInterval),
                    logger: logger)
                heartbeats.append(runner.heartbeat)
                services.append(runner)
            }
        }
        services.append(
            Pruner(
                connection: connection(.retention), retention: configuration.retention,
                partitionInterval: configuration.partitionInterval, logger: logger))
        services.append(
            FCMDeliveryDataReader(
                connection: connection(.retention), http: HTTPClient(configuration: http, logger: logger),
                endpoint: configuration.providerEndpoints["fcm"],
                defaultCredentialsFile: configuration.defaultCredentialsFile, retention: configuration.retention,
                clock: clock, logger: logger))
        if let address = configuration.httpAddress {
            services.append(endpoint(.app, at: address, connections: 2))
        }
        if let address = configuration.metricsAddress, let metrics {
            services.append(endpoint(.metrics(metrics), at: address, connections: 1))
        }

        let listener = PostgresListener(
            conninfo: configuration.databaseURL, channels: [WakeHub.channel], logger: logger, link: link,
            onNotification: { notification in
                if notification.payload == WorkerKind.dispatch.rawValue { births?.queueSignalled() }
                hub.wake(kind: notification.payload)
            },
            onReconnect: {
                births?.queueSignalled()
                hub.wakeAll()
            })
        listener.start()
        defer { listener.stop() }
        // Last, so READY=1 goes out once the schema is checked and the workers are built.
        services.append(Watchdog(notifier: SystemdNotifier(), heartbeats: heartbeats, logger: logger))

        logger.info(
            "herald is running",
            metadata: [
                "workers": "\(kinds.joined(separator: ","))",
                "worker_id": "\(configuration.workerID)",
            ])
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        logger.info("herald stopped")
    }

    private func endpoint(_ routes: Endpoint.Routes, at address: (host: String, port: Int), connections: Int)
        -> Endpoint
    {
        var settings = Endpoint.Settings(host: address.host, port: address.port)
        settings.routes = routes
        settings.timeout = configuration.httpTimeout
        settings.receiptReaders = ProviderReceipts.readers
        return Endpoint(
            settings: settings,
            connections: (0..<connections).map { _ in connection(.endpoint) }, logger: logger)
    }

    /// What a worker (or lease rescue) works with on `connection`: the configured worker id,
    /// lease and backoff, the shared senders, and the deliveries leased at birth.
    private func context(on connection: PostgresConnection, senders: Senders? = nil, births: BirthLeases? = nil)
        -> WorkerContext
    {
        WorkerContext(
            connection: connection, clock: clock, logger: logger, workerID: configuration.workerID,
            lease: configuration.lease,
            backoff: Backoff(base: configuration.backoffBase, cap: configuration.backoffCap),
            senders: senders, births: births)
    }

    /// The longest wait between two tries to reach the database at start.
    static let longestStartWait: Duration = .seconds(30)

    /// Checks the schema, first waiting for the database while it cannot be reached or take
    /// writes (down, restarting, in a failover): tries again with a doubling wait (1 s to 30 s),
    /// saying so in the log and to systemd (`STATUS=`), which is told the daemon is ready only
    /// once it can work. A schema out of date still stops it. (A refused login is waited for
    /// too, its reason in each warning: libpq gives a failed connection no SQLSTATE to tell it
    /// from a server still starting.)
    private func waitForTheDatabase() async throws {
        var wait: Duration = .seconds(1)
        while true {
            let database = connection()
            do {
                try await checkSchema(database)
                await database.close()
                return
            } catch let error as PostgresError where error.isTransient {
                await database.close()
                logger.warning(
                    "waiting for the database", metadata: ["error": "\(error)", "retry_in": "\(wait)"])
                _ = SystemdNotifier().notify("STATUS=waiting for the database: \(error)")
                try await Task.sleep(for: wait)
                wait = min(wait * 2, Self.longestStartWait)
            } catch let error as MigrationLockTimeout {
                // HERALD_AUTO_MIGRATE, while another host's migration (or a stuck session) holds
                // the lock: waited for as for the database, its holder named each time.
                await database.close()
                logger.warning("waiting to migrate", metadata: ["error": "\(error)", "retry_in": "\(wait)"])
                _ = SystemdNotifier().notify("STATUS=waiting to migrate: \(error)")
                try await Task.sleep(for: wait)
                wait = min(wait * 2, Self.longestStartWait)
            }
        }
    }

    /// Refuses to start on a database that lacks migrations or function files (new or changed)
    /// this binary needs, unless `HERALD_AUTO_MIGRATE` asks to apply them, or whose schema a
    /// newer release made and no longer serves this binary (``DaemonTooOld``).
    private func checkSchema(_ connection: PostgresConnection) async throws {
        let migrator = Migrator(logger: logger)
        if configuration.autoMigrate {
            try await migrator.migrate(connection)
        } else {
            let pending =
                try await migrator.pending(connection).map(\.name)
                + migrator.pendingFunctionFiles(connection).map { "functions/\($0.name)" }
            if !pending.isEmpty {
                throw DaemonError.schemaOutOfDate(pending: pending)
            }
        }
        try await migrator.checkServed(connection)
    }
}

public enum DaemonError: Error, CustomStringConvertible {
    case schemaOutOfDate(pending: [String])

    public var description: String {
        switch self {
        case .schemaOutOfDate(let pending):
            return "the database lacks migrations \(pending.joined(separator: ", ")); run `herald migrate` first"
                + " (or set HERALD_AUTO_MIGRATE=true)"
        }
    }
}
