import CLibPQ
import Dispatch
import Foundation
import Logging
import Synchronization

/// One libpq connection, safe to share between tasks.
///
/// Every libpq call runs on the connection's own serial dispatch queue, never on Swift's
/// cooperative thread pool, so a slow query blocks nothing but this connection. Calls are
/// served one at a time, in order.
///
/// The connection is opened lazily and opened again after it breaks (a server restart, a
/// network failure): the call that finds it broken fails with a ``PostgresError/Kind/connection``
/// error, and the next call reconnects. Statements with parameters are prepared once per
/// connection and reused.
///
/// A server that can no longer take writes (see ``PostgresError/isReadOnlyServer``: a primary
/// turned read-only, a standby) is left the same way: the call that met it fails, the connection
/// is closed when that call's session ends, and the next call connects again through the
/// connection string, whose host list and `target_session_attrs=read-write` find the writable
/// server after a failover. So is a server that says it is read-only (`in_hot_standby` or
/// `default_transaction_read_only`, which PostgreSQL 14 and later report to the client at
/// connect and whenever they change): a connection that reaches one fails as if refused, and
/// one whose server turns read-only is closed at the end of the session that learns it, even
/// a session of reads. (Unless it was made to accept read-only servers: an administrator's
/// connection to a standby, say.)
public final class PostgresConnection: @unchecked Sendable {
    /// The libpq connection string (`host=… dbname=…` or `postgresql://…`); empty means libpq's
    /// defaults and the standard `PG*` environment variables.
    public let conninfo: String
    /// The daemon's shared view of its database, told of every connect, failure and session.
    public let link: DatabaseLink?
    /// Stays on a read-only server, rather than leaving it for a writable one.
    let acceptsReadOnlyServers: Bool
    let logger: Logger
    private let queue: DispatchQueue

    // State below is touched only on `queue`.
    private var handle: OpaquePointer?
    /// `host:port` of `handle`'s server.
    private var server = ""
    private var everConnected = false
    private var preparedNames: [String: String] = [:]
    /// Statements prepared on this connection so far, which names the next one.
    private var preparedCount = 0
    private var setupStatements: [String] = []
    /// The server refused a statement as read-only: close the connection once the session ends.
    private var replaceAfterSession: PostgresError?
    /// libpq's means to cancel the statement running on `handle`, from any thread (``cancel()``).
    private let canceller = Mutex<CancelHandle?>(nil)
    /// Whether what the server reported of itself at connect (`in_hot_standby`,
    /// `default_transaction_read_only`) proved true. A pooler may pass on a stale report (the
    /// welcome it cached from a server that was a standby then): such a connection leaves only
    /// on a refused write.
    private var trustsReportedStatus = true

    /// Whether the server takes no writes, asked of the server itself: in recovery (a standby), or
    /// its transactions read-only (`default_transaction_read_only`). One row, one boolean.
    public static let readOnlyTest = "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'"

    /// The number of distinct statements kept prepared per connection; others run unprepared.
    static let preparedStatementLimit = 256

    /// `setup`: statements run after every connect, before anything else (the daemon's bounds
    /// on its statements' waits, `SET lock_timeout = …`).
    public init(
        conninfo: String, logger: Logger = Logger(label: "herald.postgres"), link: DatabaseLink? = nil,
        acceptsReadOnlyServers: Bool = false, setup: [String] = []
    ) {
        self.conninfo = conninfo
        self.link = link
        self.acceptsReadOnlyServers = acceptsReadOnlyServers
        self.logger = logger
        self.queue = DispatchQueue(label: "herald.postgres.connection")
        self.setupStatements = setup
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Opens a connection now, so that a bad connection string fails here rather than later.
    public static func connect(
        _ conninfo: String, logger: Logger = Logger(label: "herald.postgres"), acceptsReadOnlyServers: Bool = false
    ) async throws -> PostgresConnection {
        let connection = PostgresConnection(
            conninfo: conninfo, logger: logger, acceptsReadOnlyServers: acceptsReadOnlyServers)
        try await connection.withSession { _ in }
        return connection
    }

    /// How a statement with parameters is planned.
    public enum Planning: Sendable {
        /// Prepared once per connection. After five calls PostgreSQL may settle on a generic
        /// plan, which it keeps until the statistics of a table it reads change.
        case prepared
        /// Planned at each call, with the parameters' values and the tables as they are now: for
        /// a statement that runs once a batch and reads a partition that grows from empty (a
        /// generation's), where a generic plan made while it was empty would be kept as it grows.
        case eachCall
    }

    /// Runs one statement with parameters bound to `$1`, `$2`, …
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = [], planning: Planning = .prepared)
        async throws -> PostgresResult
    {
        try await withSession { try $0.query(sql, parameters, planning: planning) }
    }

    /// Runs a script of one or more statements without parameters (migrations, `SET`, `LISTEN`).
    public func execute(_ script: String) async throws {
        try await withSession { try $0.execute(script) }
    }

    /// Runs `body` on the connection's queue with exclusive use of the connection, so that
    /// several statements go out back to back without a hop per statement.
    public func withSession<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                let result = Result {
                    try self.ensureConnected()
                    return try body(PostgresSession(connection: self))
                }
                // Not earlier: a transaction that met the refusal still rolls back on its own
                // connection, and the session's later statements do not find it gone.
                self.endSession()
                continuation.resume(with: result)
            }
        }
    }

    /// Runs `body` inside `BEGIN` … `COMMIT`; rolls back if it throws.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) throws -> T) async throws -> T {
        try await withSession { session in try session.transaction { try body($0) } }
    }

    /// Statements to run after every (re)connect, such as `LISTEN` or `SET`.
    public func addSetupStatement(_ sql: String) async throws {
        try await withSession { session in
            session.connection.setupStatements.append(sql)
            try session.execute(sql)
        }
    }

    /// Asks the server to cancel the statement running now, if any (it fails with SQLSTATE
    /// `57014`); callable from any task or thread, unlike everything else here, which waits its
    /// turn on the connection's queue. A statement that ends first is not affected.
    public func cancel() {
        guard let cancel = canceller.withLock({ $0 }) else { return }
        // PQcancel connects to the server, which may take long in a failover: not on the
        // caller's thread, and not under the lock (the handle stays alive while it runs).
        DispatchQueue.global().async {
            var reason = [CChar](repeating: 0, count: 256)
            _ = PQcancel(cancel.pointer, &reason, Int32(reason.count))
        }
    }

    /// Closes the connection; a later call opens a new one.
    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.dropHandle()
                continuation.resume()
            }
        }
    }

    // MARK: - On the queue

    private func ensureConnected() throws {
        if let handle, PQstatus(handle) == CONNECTION_OK { return }
        dropHandle()
        guard let fresh = PQconnectdb(conninfo) else {
            throw PostgresError(.connection, "libpq could not allocate a connection")
        }
        guard PQstatus(fresh) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(fresh))
            PQfinish(fresh)
            let error = PostgresError(.connection, message.isEmpty ? "cannot connect" : message)
            link?.unreachable("\(error)")
            throw error
        }
        handle = fresh
        let cancel = PQgetCancel(fresh).map(CancelHandle.init)
        canceller.withLock { $0 = cancel }
        server = Self.server(of: fresh)
        link?.connected(to: server, again: everConnected)
        everConnected = true
        trustsReportedStatus = true
        if !acceptsReadOnlyServers, let reason = Self.readOnlyReason(fresh) {
            let confirmed: Bool
            do {
                confirmed = try runQuery(Self.readOnlyTest, [])[0].decode(0, as: Bool.self)
            } catch {
                dropHandle()
                throw error
            }
            if confirmed {
                // What the server itself would answer to a write; no statement is tried on it.
                replaceAfterSession = PostgresError(
                    .server, "the server is read-only (\(reason))", sqlState: PostgresError.readOnlyTransaction)
                throw replaceAfterSession!
            }
            trustsReportedStatus = false
        }
        // Every session speaks UTC and ISO dates, which the decoders rely on. JIT is off: a
        // statement's estimates over the partitioned tables can cross its thresholds, and then
        // every call compiled anew (seconds of compilation for a claim that runs in milliseconds;
        // Debian's PostgreSQL ships with JIT on). Nothing Herald runs is long enough to repay it.
        var setup =
            "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET client_min_messages = 'warning'; SET jit = off;"
        if let name = PQparameterStatus(fresh, "application_name"), name.pointee == 0 {
            setup += " SET application_name = 'herald';"
        }
        do {
            try runScript(setup)
            for statement in setupStatements { try runScript(statement) }
        } catch {
            dropHandle()
            throw error
        }
    }

    private func dropHandle() {
        canceller.withLock { $0 = nil }
        if let handle { PQfinish(handle) }
        handle = nil
        preparedNames.removeAll()
        preparedCount = 0
        replaceAfterSession = nil
    }

    /// Closes a connection whose server refused a statement as read-only or says it is read-only
    /// now, so that the next call looks for a writable server; tells the link how the session went.
    private func endSession() {
        guard let handle, !acceptsReadOnlyServers else { return }
        guard
            let reason = replaceAfterSession.map({ "\($0)" })
                ?? (trustsReportedStatus ? Self.readOnlyReason(handle) : nil)
        else {
            link?.worked(on: server)
            return
        }
        // Host and port only: the connection string may hold a password.
        logger.debug("closing a connection to a read-only server", metadata: ["server": "\(server)"])
        link?.readOnly(server, reason)
        dropHandle()
    }

    /// Why the server says it takes no writes, from what it reports of itself; nil when it takes
    /// them (or is older than PostgreSQL 14 and says nothing: then a refused write tells).
    static func readOnlyReason(_ handle: OpaquePointer) -> String? {
        for parameter in ["in_hot_standby", "default_transaction_read_only"]
        where text(PQparameterStatus(handle, parameter)) == "on" {
            return "\(parameter) is on"
        }
        return nil
    }

    /// `host:port`, never the user or the password.
    static func server(of handle: OpaquePointer) -> String {
        "\(text(PQhost(handle))):\(text(PQport(handle)))"
    }

    /// After a failure, forget a connection that is no longer usable so the next call reconnects.
    private func checkHealth(_ message: String) {
        if let handle, PQstatus(handle) != CONNECTION_OK {
            logger.debug(
                "PostgreSQL connection lost; it will be reopened on next use", metadata: ["server": "\(server)"])
            link?.unreachable(message)
            dropHandle()
        }
    }

    func runScript(_ script: String) throws {
        guard let handle else { throw PostgresError(.connection, "not connected") }
        let result = PQexec(handle, script)
        _ = try consume(result)
    }

    func runQuery(_ sql: String, _ parameters: [any PostgresEncodable], planning: Planning = .prepared) throws
        -> PostgresResult
    {
        guard let handle else { throw PostgresError(.connection, "not connected") }
        // Parameters are bound first: one PostgreSQL cannot hold fails before anything is sent.
        func run() throws -> PostgresResult {
            let result = try withBoundParameters(parameters) { count, values, lengths, formats in
                if planning == .prepared, let statementName = try preparedName(for: sql, handle: handle) {
                    return PQexecPrepared(handle, statementName, count, values, lengths, formats, 0)
                }
                return PQexecParams(handle, sql, count, nil, values, lengths, formats, 0)
            }
            return try consume(result)
        }
        do {
            return try run()
        } catch let error as PostgresError where error.isResultTypeChanged {
            // A function it calls was made again with other columns (a newer release's
            // migration): prepared again, it returns them, and columns are read by name. Run
            // again only outside a transaction, which the failure has otherwise aborted.
            guard PQtransactionStatus(handle) == PQTRANS_IDLE, let stale = preparedNames.removeValue(forKey: sql)
            else { throw error }
            _ = try consume(PQexec(handle, "DEALLOCATE \(stale)"))
            return try run()
        }
    }

    private func preparedName(for sql: String, handle: OpaquePointer) throws -> String? {
        if let name = preparedNames[sql] { return name }
        guard preparedNames.count < Self.preparedStatementLimit else { return nil }
        let name = "herald_\(preparedCount)"
        _ = try consume(PQprepare(handle, name, sql, 0, nil))
        preparedCount += 1
        preparedNames[sql] = name
        return name
    }

    /// Turns a PGresult into a ``PostgresResult`` or a ``PostgresError``.
    private func consume(_ result: OpaquePointer?) throws -> PostgresResult {
        guard let result else {
            let message = handle.map { Self.trimmed(PQerrorMessage($0)) } ?? "no connection"
            checkHealth(message)
            throw PostgresError(.connection, message)
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgresResult(result)
        default:
            let error = Self.error(from: result)
            PQclear(result)
            checkHealth("\(error)")
            if error.isReadOnlyServer, handle != nil { replaceAfterSession = error }
            throw error
        }
    }

    static func error(from result: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C")
        let message = field("M") ?? trimmed(PQresultErrorMessage(result))
        return PostgresError(
            sqlState == nil ? .connection : .server, message,
            sqlState: sqlState, detail: field("D"), hint: field("H"))
    }

    static func text(_ value: UnsafePointer<CChar>?) -> String {
        value.map { String(cString: $0) } ?? ""
    }

    static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Exclusive use of a connection inside ``PostgresConnection/withSession(_:)``: plain blocking
/// calls, valid only inside the closure it was handed to.
public struct PostgresSession {
    let connection: PostgresConnection

    /// Runs one statement with parameters bound to `$1`, `$2`, …
    @discardableResult
    public func query(
        _ sql: String, _ parameters: [any PostgresEncodable] = [],
        planning: PostgresConnection.Planning = .prepared
    ) throws -> PostgresResult {
        try connection.runQuery(sql, parameters, planning: planning)
    }

    /// Runs a script of one or more statements without parameters.
    public func execute(_ script: String) throws {
        try connection.runScript(script)
    }

    /// Runs `body` inside `BEGIN` … `COMMIT`; rolls back if it throws.
    public func transaction<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body(self)
            try execute("COMMIT")
            return value
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

@available(*, unavailable)
extension PostgresSession: Sendable {}

/// Binds parameters as C arrays for the duration of one libpq call.
///
/// Text parameters travel as C strings, so a NUL inside one would silently end it there
/// (and PostgreSQL's text types cannot hold NUL anyway): such a parameter is refused with
/// a ``PostgresError/Kind/usage`` error naming it, and `body` is not called.
private func withBoundParameters<R>(
    _ parameters: [any PostgresEncodable],
    _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) throws -> R
) throws -> R {
    if parameters.isEmpty { return try body(0, nil, nil, nil) }
    var values: [UnsafePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var owned: [UnsafeMutableRawPointer] = []
    values.reserveCapacity(parameters.count)
    lengths.reserveCapacity(parameters.count)
    formats.reserveCapacity(parameters.count)
    defer { owned.forEach { free($0) } }
    for (index, parameter) in parameters.enumerated() {
        switch parameter.postgresParameter {
        case .null:
            values.append(nil)
            lengths.append(0)
            formats.append(0)
        case .text(let text):
            // One pass copies the text and a second, memchr's, finds any NUL in it.
            let count = text.utf8.count
            let copy = malloc(count + 1)!.assumingMemoryBound(to: UInt8.self)
            owned.append(UnsafeMutableRawPointer(copy))
            _ = UnsafeMutableBufferPointer(start: copy, count: count).initialize(from: text.utf8)
            copy[count] = 0
            if memchr(copy, 0, count) != nil {
                throw PostgresError(
                    .usage,
                    "parameter $\(index + 1) holds a NUL character (U+0000), in its text or in an array's element, "
                        + "which PostgreSQL text cannot hold: refuse or remove it before binding the value",
                    // PostgreSQL's own code for a NUL it is sent (in COPY, say), so that callers
                    // treat this as the bad value it is (a data exception), not as a bug of theirs.
                    sqlState: "22021")
            }
            values.append(UnsafeRawPointer(copy).assumingMemoryBound(to: CChar.self))
            lengths.append(0)
            formats.append(0)
        case .binary(let bytes):
            let copy = malloc(max(bytes.count, 1))!
            if !bytes.isEmpty {
                bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            }
            owned.append(copy)
            values.append(UnsafePointer(copy.assumingMemoryBound(to: CChar.self)))
            lengths.append(Int32(bytes.count))
            formats.append(1)
        }
    }
    return try body(Int32(parameters.count), values, lengths, formats)
}

/// A `PGcancel`, freed when the last reference goes: ``PostgresConnection/cancel()`` may still
/// be using it after the connection moved on.
private final class CancelHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQfreeCancel(pointer) }
}
