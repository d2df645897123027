import HeraldPostgres
import Logging
import Metrics

/// How long the daemon's statements may wait, by the kind of connection they run on: the one
/// home of these bounds (docs/architecture.md, "Producers beside the workers").
///
/// Producers' sessions share the database with the workers, and a producer's open transaction
/// holds the rows it wrote (a device it registered, a delivery it fetched) until it ends. A
/// worker statement that needs one of those rows gives up after `lockTimeout` (SQLSTATE 55P03,
/// ``PostgresError/isLockTimeout``) instead of waiting as long as the producer likes; the worker
/// then goes on with the rest of its batch and leaves the locked rows for later. `statementTimeout`
/// ends a statement that runs away for any other reason.
public struct StatementBounds: Sendable, Equatable {
    /// How long a statement waits for a lock another session holds.
    public var lockTimeout: Duration
    /// How long a statement may run in all.
    public var statementTimeout: Duration

    /// The worker loops' (ingest, dispatch, reconcile, retry, channels): their statements take
    /// milliseconds, and another daemon holds a row they need for as long as one of its own.
    /// Short enough that a batch that meets a producer's lock, and then the row alone, still ends
    /// within about a second.
    public static let worker = StatementBounds(lockTimeout: .milliseconds(500), statementTimeout: .seconds(30))
    /// The HTTP endpoint's (reports, the pending fetch): one request's statement each.
    public static let endpoint = StatementBounds(lockTimeout: .seconds(1), statementTimeout: .seconds(10))
    /// Retention's: its functions bound their own lock waits (half a second, then the next pass
    /// tries again); a prune of a large table may run long.
    public static let retention = StatementBounds(lockTimeout: .seconds(1), statementTimeout: .seconds(600))

    /// The statement that sets them on a connection, run at every connect.
    public var setup: String {
        "SET lock_timeout = '\(Self.milliseconds(lockTimeout))ms'; "
            + "SET statement_timeout = '\(Self.milliseconds(statementTimeout))ms'"
    }

    /// Says, in the log and in `herald_lock_waits_total` (alerted on in deploy/), that a `kind`
    /// worker left `what` to be tried again `until`: a row it needed was locked by another session
    /// past `lockTimeout`, and the rest of its batch went on.
    static func leftLocked(_ what: String, kind: String, until: String, logger: Logger) {
        lockWaits(kind: kind).increment()
        logger.warning(
            "rows are locked by another session; what needs them is tried again later and the rest goes on",
            metadata: [
                "kind": "\(kind)", "left": "\(what)", "retry": "\(until)",
                "see": "herald status (sessions that hold up the workers)",
            ])
    }

    /// Starts `kind`'s count of lock waits at zero, so that a scrape shows it before the first.
    public static func countLockWaits(kind: String) {
        lockWaits(kind: kind).increment(by: 0)
    }

    private static func lockWaits(kind: String) -> Counter {
        Counter(label: "herald_lock_waits_total", dimensions: [("kind", kind)])
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
