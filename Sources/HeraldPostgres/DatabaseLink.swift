import Logging
import Metrics
import Synchronization

/// What a daemon's connections know of its database: the server they reach, whether it takes
/// writes, and how often they had to connect again. One per daemon, shared by every connection
/// it opens and by its LISTEN connection; `/healthz`, the metrics and the log read it.
///
/// The log says each change once (the database became unreachable, or read-only, or writable
/// again), not once per connection: a failover is a handful of lines, not a dozen per worker.
public final class DatabaseLink: Sendable {
    public struct Snapshot: Sendable, Equatable {
        /// `host:port` of the server last reached; never the user or the password.
        public var server: String?
        /// Whether the last statement ran on a server that takes writes.
        public var writable: Bool
        /// Since when the daemon has had no writable server (nil while it has one).
        public var unwritableSince: ContinuousClock.Instant?
        /// Why not: the last failure to connect, or the read-only server's refusal.
        public var problem: String?
        /// Connections opened again after a first one: after a break, a restart, a failover.
        public var reconnects: Int

        /// How long the daemon has had no writable server; zero while it has one.
        public var unwritableFor: Duration {
            unwritableSince.map { ContinuousClock.now - $0 } ?? .zero
        }
    }

    private let state: Mutex<Snapshot>
    private let logger: Logger

    /// Starts without a writable server, until the first statement succeeds.
    public init(logger: Logger) {
        self.logger = logger
        state = Mutex(
            Snapshot(writable: false, unwritableSince: .now, problem: "not connected yet", reconnects: 0))
        Gauge(label: "herald_database_writable").record(0)
    }

    public var snapshot: Snapshot { state.withLock { $0 } }

    /// A connection was opened to `server`; `again` when it replaces one that was open before.
    func connected(to server: String, again: Bool) {
        let changed = state.withLock { state -> String?? in
            if again { state.reconnects += 1 }
            guard state.server != server else { return nil }
            defer { state.server = server }
            return .some(state.server)
        }
        if again { Counter(label: "herald_database_reconnects_total").increment() }
        if let previous = changed {
            if let previous { Gauge(label: "herald_database_server", dimensions: [("server", previous)]).record(0) }
            Gauge(label: "herald_database_server", dimensions: [("server", server)]).record(1)
        }
    }

    /// A session ended well on `server`, which takes writes.
    func worked(on server: String) {
        let recovered = state.withLock { state -> (Duration, String?, Int)? in
            guard !state.writable else { return nil }
            let outage = state.unwritableFor
            defer {
                state.writable = true
                state.unwritableSince = nil
                state.problem = nil
            }
            return (outage, state.problem, state.reconnects)
        }
        guard let (outage, problem, reconnects) = recovered else { return }
        Gauge(label: "herald_database_writable").record(1)
        if problem == "not connected yet" { return }
        logger.notice(
            "PostgreSQL server takes writes again",
            metadata: ["server": "\(server)", "after": "\(outage)", "reconnects": "\(reconnects)"])
    }

    /// The database could not be reached, or a connection to it broke.
    func unreachable(_ problem: String) {
        lost(problem) {
            logger.warning(
                "PostgreSQL unreachable; every connection tries again on its next use (through each host of the connection string)",
                metadata: ["error": "\(problem)"])
        }
    }

    /// `server` cannot take writes (a standby, or a primary turned read-only in a failover).
    func readOnly(_ server: String, _ problem: String) {
        lost("\(server) is read-only: \(problem)") {
            logger.warning(
                "PostgreSQL server is read-only (in recovery, or default_transaction_read_only is on); connections to it are closed and opened again to find a writable server",
                metadata: ["server": "\(server)", "error": "\(problem)"])
        }
    }

    private func lost(_ problem: String, warn: () -> Void) {
        let first = state.withLock { state -> Bool in
            defer {
                state.writable = false
                state.problem = problem
            }
            guard state.writable else { return false }
            state.unwritableSince = .now
            return true
        }
        guard first else { return }
        Gauge(label: "herald_database_writable").record(0)
        warn()
    }
}
