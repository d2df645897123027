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
public final class PostgresListener: Sendable {
    private let conninfo: String
    private let channels: [String]
    private let logger: Logger
    private let onNotification: @Sendable (PostgresNotification) -> Void
    private let onReconnect: @Sendable () -> Void
    private let stopped = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)
    private let finishedCondition = NSCondition()

    /// How often the thread checks whether it was asked to stop.
    static let pollInterval: Int32 = 200

    public init(
        conninfo: String,
        channels: [String],
        logger: Logger,
        onNotification: @escaping @Sendable (PostgresNotification) -> Void,
        onReconnect: @escaping @Sendable () -> Void = {}
    ) {
        self.conninfo = conninfo
        self.channels = channels
        self.logger = logger
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
            logger.warning("listener cannot subscribe; retrying")
            PQfinish(connection)
            return nil
        }
        return connection
    }

    /// Waits for notifications until the connection breaks or the listener is stopped.
    private func listen(on connection: OpaquePointer) {
        let socket = PQsocket(connection)
        while !stopped.load(ordering: .relaxed) {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Self.pollInterval)
            if ready < 0 && errno != EINTR { return }
            if ready <= 0 { continue }
            guard PQconsumeInput(connection) == 1 else {
                logger.warning("listener connection lost; reconnecting")
                return
            }
            while let notify = PQnotifies(connection) {
                let message = PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra))
                PQfreemem(notify)
                onNotification(message)
            }
            if PQstatus(connection) != CONNECTION_OK { return }
        }
    }
}

/// Quotes an SQL identifier (`"name"`, with embedded quotes doubled).
public func quoteIdentifier(_ name: String) -> String {
    "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
