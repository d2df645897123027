/// An error from PostgreSQL or from this wrapper, with enough detail to act on.
///
/// Server errors carry PostgreSQL's SQLSTATE (`23505` for a unique violation, and so on),
/// so callers can branch on the condition rather than on message text.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Connecting failed, or the connection broke during a call.
        case connection
        /// The server answered with an error (see ``sqlState``).
        case server
        /// A value could not be read as the requested Swift type.
        case decoding
        /// The call itself was wrong (a missing column, a bad parameter).
        case usage
    }

    public var kind: Kind
    /// The five-character SQLSTATE code, for server errors; also for the wrapper's own refusal
    /// of a value the server would refuse the same way (a NUL in text: `22021`, kind `usage`).
    public var sqlState: String?
    public var message: String
    public var detail: String?
    public var hint: String?

    public init(
        _ kind: Kind, _ message: String, sqlState: String? = nil, detail: String? = nil, hint: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
    }

    public var description: String {
        var text: String
        switch kind {
        case .connection: text = "PostgreSQL connection error: \(message)"
        case .server: text = "PostgreSQL error \(sqlState ?? "?????"): \(message)"
        case .decoding: text = "cannot decode PostgreSQL value: \(message)"
        case .usage: text = "PostgreSQL usage error: \(message)"
        }
        if let detail { text += " (detail: \(detail))" }
        if let hint { text += " (hint: \(hint))" }
        return text
    }

    /// `true` for a unique violation (SQLSTATE 23505).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// `true` when the statement gave up waiting for a lock another session holds (SQLSTATE
    /// 55P03, `lock_timeout`): a row it needed was locked, most often by a producer's open
    /// transaction, so the rows of that statement not locked can go on without it.
    public var isLockTimeout: Bool { sqlState == "55P03" }

    /// What PostgreSQL answers a prepared statement whose result's columns changed since it was
    /// prepared (a function it calls was made again with others): feature_not_supported,
    /// "cached plan must not change result type" in the server's own language, so the code alone
    /// says it. Any other refusal of the class comes back the same when the statement is
    /// prepared again.
    public var isResultTypeChanged: Bool { sqlState == "0A000" }

    /// `true` when the server refused because it cannot take writes now, so a connection to it is
    /// of no use to Herald and another server (found through the connection string's host list and
    /// `target_session_attrs=read-write`) should be tried:
    ///
    /// - `25006` read_only_sql_transaction: a write in a read-only transaction. A primary turned
    ///   read-only without closing its connections (`default_transaction_read_only = on` and a
    ///   reload, which is what an Aurora failover looks like to a client) says this for every
    ///   write, and so does a standby, whose transactions are all read-only, including its
    ///   `cannot execute LISTEN during recovery`.
    /// - `57P03` cannot_connect_now: the server is starting up, shutting down or in recovery
    ///   ("the database system is in recovery mode").
    ///
    /// A transaction the caller itself made read-only (`BEGIN READ ONLY`) also fails with `25006`;
    /// Herald makes none, so that costs at most one needless reconnect.
    public var isReadOnlyServer: Bool { sqlState.map(Self.readOnlyServerStates.contains) ?? false }

    static let readOnlyServerStates: Set<String> = [readOnlyTransaction, "57P03"]
    /// `read_only_sql_transaction`: a write refused by a read-only server.
    static let readOnlyTransaction = "25006"

    /// `true` when the statement failed for a reason that is not about its data, so the same
    /// statement may well succeed later: a connection that could not be made or broke, a
    /// connection exception (class `08`), a transaction
    /// rolled back (`40`: serialization failure, deadlock), insufficient resources (`53`), a lock
    /// not available in time (`55P03`), operator intervention (`57`: cancelled, a statement
    /// timeout, a shutdown), a system error (`58`), and a server that cannot take writes
    /// (``isReadOnlyServer``). A worker that tells bad rows apart by retrying them alone must not
    /// blame a row for these.
    public var isTransient: Bool {
        if kind == .connection { return true }
        guard kind == .server, let sqlStateClass else { return false }
        return ["08", "40", "53", "57", "58"].contains(sqlStateClass) || sqlState == "55P03" || isReadOnlyServer
    }

    /// The SQLSTATE's class, its first two characters, for server errors: `22` data exception
    /// (a value out of range or of the wrong form), `23` integrity constraint violation,
    /// `08` connection exception, and so on (PostgreSQL's "Errcodes" appendix).
    public var sqlStateClass: String? { sqlState.map { String($0.prefix(2)) } }
}
