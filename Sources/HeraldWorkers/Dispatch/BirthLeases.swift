import HeraldCore
import HeraldPostgres
import Logging
import Synchronization

/// Deliveries leased at birth, on their way from this daemon's ingest to its dispatch: their
/// ids, and when their leases were asked for.
///
/// Ingest creates some of the deliveries it makes already leased to this daemon
/// (`herald.ingest`'s `lease_to`, `migrations/functions/ingest.sql`) and hands their ids here;
/// dispatch's claim reads them beside what it claims from the queue, in one statement
/// (`herald.claim_batch`' `held`). That saves each of them the claim's update of its row, and
/// each commit at a trickle the wait for the database's wake-up. Nobody else is woken for them:
/// the NOTIFY that wakes dispatch goes out only for deliveries a claim can take now
/// (`herald.notify_worker`'s `herald.wakes_itself`).
///
/// What is reserved is bounded: ingest leases no more than ``room``, so a daemon holds only
/// what its dispatch takes within moments, and the rest stay queued for any daemon. A dispatch
/// batch takes up to its size from here; it claims from the queue too (at least ``queueShare``
/// of its size, however many wait here) when it holds none, when a NOTIFY said deliveries are
/// queued or the last claim came back full (``queueSignalled()``), and at least once a poll
/// interval, so that deliveries already queued (a backlog, retries, scheduled sends coming due)
/// keep their turn. At shutdown what is still here is given back (``SQL/release``); after a
/// crash, the leases run out and any daemon's claim takes the deliveries, as for any claim a
/// crash left. A delivery is sent from here only while half its lease is left, so that no other
/// claim can take it while it is sent; one that waited longer (the dispatch loops stuck) is
/// given back, due at once for any claim.
public final class BirthLeases: Sendable {
    private struct Handed {
        /// The deliveries' ids.
        var births: [Int64]
        /// When the lease was asked for (before the ingest statement went out): it ends no
        /// earlier than this plus the lease.
        var leasedAt: ContinuousClock.Instant
    }
    private struct State {
        /// The most deliveries waiting here at once.
        let capacity: Int
        var handed: [Handed] = []
        var count = 0
        /// Room promised to ingest statements still running.
        var reserved = 0
        var closed = false
        /// A NOTIFY said deliveries are queued since the last claim from the queue began.
        var queueSignalled = false
        /// When the last claim from the queue began; nil before the first.
        var lastQueueClaim: ContinuousClock.Instant?

        var room: Int { closed ? 0 : max(0, capacity - count - reserved) }
    }
    private let state: Mutex<State>
    private let wake: @Sendable () -> Void
    /// The longest a batch holding births goes without claiming from the queue.
    private let queuePollInterval: Duration
    private let clock: any MonotonicClock

    /// The least share of a dispatch batch claimed from the queue, beside what comes from here
    /// (a batch is then up to this much larger than its size). Splitting a batch instead would
    /// split each handful of births into two sends.
    static let queueShare = 1.0 / 4.0

    /// How many of a batch of `limit` to claim from the queue, beside `held` from here.
    static func fromQueue(limit: Int, held: Int) -> Int {
        max(limit - held, Int((Double(limit) * queueShare).rounded(.up)))
    }

    /// - Parameters:
    ///   - capacity: the most deliveries to hold at once: about what the dispatch loops take
    ///     in one round of batches.
    ///   - queuePollInterval: the longest a dispatch batch holding births goes without claiming
    ///     from the queue too (the dispatch loops' poll interval).
    ///   - clock: the elapsed time leases and the poll interval are counted on.
    ///   - wake: wakes the dispatch loops when deliveries arrive.
    public init(
        capacity: Int, queuePollInterval: Duration = .seconds(2), clock: any MonotonicClock = ContinuousClock(),
        wake: @escaping @Sendable () -> Void
    ) {
        state = Mutex(State(capacity: capacity))
        self.queuePollInterval = queuePollInterval
        self.clock = clock
        self.wake = wake
    }

    /// How many more deliveries may be leased at birth now; none once closed.
    var room: Int { state.withLock { $0.room } }

    /// Promises room to one ingest statement, at most `limit` (its batch), which leases up to
    /// that many: two ingest loops cannot both fill the same room, and neither takes all of it
    /// (at a steady rate the two often run at once, and the second would lease nothing). The
    /// statement's ``hand(_:reserved:leasedAt:)`` settles the promise, whether it leased any or
    /// failed.
    func reserve(upTo limit: Int) -> Int {
        state.withLock { state in
            let promised = min(state.room, max(0, limit))
            state.reserved += promised
            return promised
        }
    }

    /// Hands deliveries an ingest statement leased at birth (with `reserved` room promised to
    /// it; none when it failed) to dispatch, and wakes it. Returns the ids of those refused
    /// because dispatch has stopped: the caller gives them back.
    func hand(_ births: [Int64], reserved: Int, leasedAt: ContinuousClock.Instant) -> [Int64] {
        let accepted = state.withLock { state -> Bool in
            state.reserved -= reserved
            guard !births.isEmpty else { return true }
            guard !state.closed else { return false }
            state.handed.append(Handed(births: births, leasedAt: leasedAt))
            state.count += births.count
            return true
        }
        guard accepted else { return births }
        if !births.isEmpty { wake() }
        return []
    }

    /// Takes up to `limit` deliveries' ids, oldest first, with the earliest time their leases were
    /// asked for. Those asked for longer than `fresh` ago are not sent from here: their ids
    /// come back as `stale`, for the caller to give back. Wakes another loop if some are left.
    func take(upTo limit: Int, fresh: Duration) -> (
        births: [Int64], leasedAt: ContinuousClock.Instant?, stale: [Int64]
    ) {
        let now = clock.now
        var stale: [Int64] = []
        let (taken, leasedAt, left) = state.withLock { state in
            var taken: [Int64] = []
            var leasedAt: ContinuousClock.Instant?
            while taken.count < limit, !state.handed.isEmpty {
                if now - state.handed[0].leasedAt > fresh {
                    let dropped = state.handed.removeFirst().births
                    state.count -= dropped.count
                    stale += dropped
                    continue
                }
                let wanted = limit - taken.count
                leasedAt = min(leasedAt ?? state.handed[0].leasedAt, state.handed[0].leasedAt)
                if state.handed[0].births.count <= wanted {
                    taken += state.handed.removeFirst().births
                } else {
                    taken += state.handed[0].births.prefix(wanted)
                    state.handed[0].births.removeFirst(wanted)
                }
            }
            state.count -= taken.count
            return (taken, leasedAt, state.count)
        }
        if left > 0 { wake() }
        return (taken, leasedAt, stale)
    }

    /// Puts back, first in line, deliveries a batch took but could not send (the database
    /// away for its claim): they are still leased to this daemon, and the next batch tries them
    /// again. Returns them if dispatch has stopped meanwhile: the caller gives them back.
    func putBack(_ births: [Int64], leasedAt: ContinuousClock.Instant) -> [Int64] {
        guard !births.isEmpty else { return [] }
        return state.withLock { state in
            guard !state.closed else { return births }
            state.handed.insert(Handed(births: births, leasedAt: leasedAt), at: 0)
            state.count += births.count
            return []
        }
    }

    /// A NOTIFY said deliveries are queued for any claim (or the connection that listens came
    /// back, and it may have missed one): the next dispatch batch claims from the queue.
    public func queueSignalled() {
        state.withLock { $0.queueSignalled = true }
    }

    /// Whether a dispatch batch claims from the queue, holding births or not (`holding`); if it
    /// does, the claim begins now. A claim that found the queue full, or failed, calls
    /// ``queueSignalled()`` again: the queue still has work for the next batch.
    func claimsQueue(holding: Bool) -> Bool {
        let now = clock.now
        return state.withLock { state in
            let claims =
                !holding || state.queueSignalled
                || state.lastQueueClaim.map { now - $0 >= queuePollInterval } ?? true
            if claims {
                state.queueSignalled = false
                state.lastQueueClaim = now
            }
            return claims
        }
    }

    /// Stops taking deliveries, and returns those still waiting: the caller gives them back.
    func close() -> [Int64] {
        state.withLock { state in
            state.closed = true
            defer {
                state.handed = []
                state.count = 0
            }
            return state.handed.flatMap(\.births)
        }
    }

    enum SQL {
        /// Gives back deliveries $1 that worker $2 holds as ingest leased them, not sent: due at
        /// $3 (now), for any daemon (`herald.release_births`, `migrations/functions/dispatch.sql`).
        static let release = "SELECT herald.release_births($1::bigint[], $2::text, $3::timestamptz)"
    }

    /// Gives back deliveries leased at birth that will not be sent here (``SQL/release``). If the
    /// database is away, their leases run out instead, and any daemon's claim takes them then.
    static func release(_ ids: [Int64], context: WorkerContext) async {
        guard !ids.isEmpty else { return }
        do {
            try await context.connection.query(
                SQL.release, [ids, context.workerID, context.clock.now()], planning: .eachCall)
            context.logger.debug("gave back deliveries leased at birth", metadata: ["count": "\(ids.count)"])
        } catch {
            context.logger.warning(
                "could not give back deliveries leased at birth; they are claimed again when their lease ends",
                metadata: ["count": "\(ids.count)", "error": "\(error)"])
        }
    }
}
