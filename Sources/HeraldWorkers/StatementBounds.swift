import HeraldPostgres
import Logging
import Metrics

/// How long the daemon's statements may run, by the kind of connection they run on, and how
/// the workers say that a lock held them up (docs/architecture.md, "Producers beside the
/// workers").
///
/// Producers' sessions share the database with the workers, and a producer's open transaction
/// holds the rows it wrote (a device it registered, a delivery it fetched) until it ends. The
/// worker functions that lock rows a producer can hold (`herald.ingest_next`, `herald.ingest`,
/// `herald.record_sends`, `herald.reconcile`, and the channels worker's
/// `herald.record_channel_answer` and `herald.fail_unknown_channel`) wait for one at most half a
/// second, each by its own `SET lock_timeout`, so that the wait never covers the commit (a
/// commit that NOTIFYs waits for a lock every database on the server shares, and must not fail
/// for it); then they fail with SQLSTATE 55P03 (``PostgresError/isLockTimeout``), and the worker
/// goes on with every other app's work and leaves the app that met the lock for a while
/// (``HeldApps``). `statementTimeout` ends a statement that runs away for any other reason (it
/// does not cover the commit either).
public struct StatementBounds: Sendable, Equatable {
    /// How long a statement may run in all.
    public var statementTimeout: Duration

    /// The worker loops' (ingest, dispatch, reconcile, retry, channels): their statements take
    /// milliseconds.
    public static let worker = StatementBounds(statementTimeout: .seconds(30))
    /// The HTTP endpoint's (reports, the pending fetch): one request's statement each.
    public static let endpoint = StatementBounds(statementTimeout: .seconds(10))
    /// Retention's: its functions bound their own lock waits (half a second, then the next pass
    /// tries again); a prune of a large table may run long.
    public static let retention = StatementBounds(statementTimeout: .seconds(600))

    /// The statement that sets them on a connection, run at every connect.
    public var setup: String {
        "SET statement_timeout = '\(Self.milliseconds(statementTimeout))ms'"
    }

    /// Says, in the log and in `herald_lock_waits_total` (alerted on in deploy/), that a `kind`
    /// worker left `what` to be tried again `until`: a row it needed was locked by another session
    /// past its function's bound, and the rest of its batch went on.
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
