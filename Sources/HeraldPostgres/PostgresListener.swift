import CLibPQ
import Foundation
import Logging
import Synchronization

/// A notification received on a channel the listener subscribed to.
public struct PostgresNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String

    public init(channel: String, payload: String) {
        self.channel = channel
        self.payload = payload
    }
}

/// Receives `NOTIFY` messages on its own connection and its own thread.
///
/// The thread waits on the connection's socket (`PQsocket` + `poll`), reads input with
/// `PQconsumeInput` and hands each message from `PQnotifies` to `onNotification`. If the
/// connection breaks it reconnects with backoff, subscribes again and calls `onReconnect`,
/// since messages sent while it was away are lost and the caller should look for work.
///
/// A server that cannot take writes is left the same way. A `NOTIFY` is sent by the writable
/// server, so a listener on a standby, or on a primary turned read-only without closing its
/// connections (as in an Aurora failover), would wait forever while its server stays up. The
/// listener asks its server every ``readOnlyCheckInterval`` whether it is read-only
/// (``PostgresConnection/readOnlyTest``), and if so connects again through the connection
/// string, whose host list finds the writable server.
public final class PostgresListener: Sendable {
    private let conninfo: String
    private let channels: [String]
    private let logger: Logger
    private let link: DatabaseLink?
    private let onNotification: @Sendable (PostgresNotification) -> Void
    private let onReconnect: @Sendable () -> Void
    private let stopped = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)
    private let finishedCondition = NSCondition()

    /// How often the thread checks whether it was asked to stop.
    static let pollInterval: Int32 = 200
    /// How often the thread asks its server whether it is read-only: one query on an idle
    /// connection, a notification's delay at most this much (plus a reconnect) after a failover.
    static let readOnlyCheckInterval: Duration = .seconds(2)

    public init(
        conninfo: String,
        channels: [String],
        logger: Logger,
        link: DatabaseLink? = nil,
        onNotification: @escaping @Sendable (PostgresNotification) -> Void,
        onReconnect: @escaping @Sendable () -> Void = {}
    ) {
        self.conninfo = conninfo
        self.channels = channels
        self.logger = logger
        self.link = link
        self.onNotification = onNotification
        self.onReconnect = onReconnect
    }

    /// Starts the listening thread; returns once the first subscription is in place (or failed,
    /// in which case the thread keeps trying in the background).
    public func start() {
        let ready = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            run(ready: ready)
            finishedCondition.lock()
            finished.withLock { $0 = true }
            finishedCondition.broadcast()
            finishedCondition.unlock()
        }
        thread.name = "herald.listener"
        thread.start()
        ready.wait()
    }

    /// Stops the thread and closes the connection; waits until it has ended.
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        finishedCondition.lock()
        while !finished.withLock({ $0 }) { finishedCondition.wait() }
        finishedCondition.unlock()
    }

    private func run(ready: DispatchSemaphore) {
        var signalledReady = false
        var retryDelay = 0.1
        var connectedBefore = false
        while !stopped.load(ordering: .relaxed) {
            guard let connection = subscribe() else {
                if !signalledReady {
                    ready.signal()
                    signalledReady = true
                }
                Thread.sleep(forTimeInterval: retryDelay)
                retryDelay = min(retryDelay * 2, 5)
                continue
            }
            retryDelay = 0.1
            if !signalledReady {
                ready.signal()
                signalledReady = true
            }
            link?.connected(to: PostgresConnection.server(of: connection), again: connectedBefore)
            if connectedBefore { onReconnect() }
            connectedBefore = true
            listen(on: connection)
            PQfinish(connection)
        }
    }

    /// Connects and runs `LISTEN` for every channel.
    private func subscribe() -> OpaquePointer? {
        guard let connection = PQconnectdb(conninfo) else { return nil }
        guard PQstatus(connection) == CONNECTION_OK else {
            logger.warning(
                "listener cannot connect; retrying",
                metadata: ["error": "\(PostgresConnection.trimmed(PQerrorMessage(connection)))"])
            PQfinish(connection)
            return nil
        }
        let statements = channels.map { "LISTEN \(quoteIdentifier($0));" }.joined()
        let result = PQexec(connection, statements)
        defer { PQclear(result) }
        guard let result, PQresultStatus(result) == PGRES_COMMAND_OK else {
            let error =
                result.map(PostgresConnection.error(from:))
                ?? PostgresError(.connection, PostgresConnection.trimmed(PQerrorMessage(connection)))
            if error.isReadOnlyServer {
                warnReadOnly(connection, reason: "\(error)")
            } else {
                logger.warning("listener cannot subscribe; retrying", metadata: ["error": "\(error)"])
            }
            PQfinish(connection)
            return nil
        }
        // LISTEN works on a primary turned read-only, where no NOTIFY will come.
        if readOnly(connection) != false {
            PQfinish(connection)
            return nil
        }
        return connection
    }

    /// Whether the server is read-only: `nil` if the connection failed, after a warning.
    private func readOnly(_ connection: OpaquePointer) -> Bool? {
        let result = PQexec(connection, PostgresConnection.readOnlyTest)
        defer { PQclear(result) }
        guard let result, PQresultStatus(result) == PGRES_TUPLES_OK, PQntuples(result) == 1 else {
            logger.warning(
                "listener connection lost; reconnecting",
                metadata: ["error": "\(PostgresConnection.trimmed(PQerrorMessage(connection)))"])
            return nil
        }
        guard PostgresConnection.text(PQgetvalue(result, 0, 0)) == "t" else { return false }
        warnReadOnly(connection, reason: "in recovery, or its transactions are read-only")
        return true
    }

    private func warnReadOnly(_ connection: OpaquePointer, reason: String) {
        if let link {
            link.readOnly(PostgresConnection.server(of: connection), reason)
            return
        }
        // Host and port only: the connection string may hold a password.
        logger.warning(
            "listener's PostgreSQL server is read-only (in recovery, or default_transaction_read_only is on); connecting again to find a writable server",
            metadata: [
                "server": "\(PostgresConnection.server(of: connection))",
                "error": "\(reason)",
            ])
    }

    /// Waits for notifications until the connection breaks, its server turns read-only, or the
    /// listener is stopped.
    private func listen(on connection: OpaquePointer) {
        let socket = PQsocket(connection)
        let clock = ContinuousClock()
        var nextCheck = clock.now.advanced(by: Self.readOnlyCheckInterval)
        while !stopped.load(ordering: .relaxed) {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Self.pollInterval)
            if ready < 0 && errno != EINTR { return }
            if ready > 0 {
                guard PQconsumeInput(connection) == 1 else {
                    logger.warning("listener connection lost; reconnecting")
                    return
                }
                deliverNotifications(connection)
                if PQstatus(connection) != CONNECTION_OK { return }
            }
            if clock.now >= nextCheck {
                if readOnly(connection) != false { return }
                // Notifications that came in during the check wait in libpq, not on the socket.
                deliverNotifications(connection)
                nextCheck = clock.now.advanced(by: Self.readOnlyCheckInterval)
            }
        }
    }

    private func deliverNotifications(_ connection: OpaquePointer) {
        while let notify = PQnotifies(connection) {
            let message = PostgresNotification(
                channel: String(cString: notify.pointee.relname),
                payload: String(cString: notify.pointee.extra))
            PQfreemem(notify)
            onNotification(message)
        }
    }
}

/// Quotes an SQL identifier (`"name"`, with embedded quotes doubled).
public func quoteIdentifier(_ name: String) -> String {
    "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
