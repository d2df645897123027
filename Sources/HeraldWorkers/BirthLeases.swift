import HeraldPostgres
import Logging
import Synchronization

/// Deliveries leased at birth, on their way from this daemon's ingest to its dispatch.
///
/// Ingest creates some of the deliveries it makes already leased to this daemon
/// (`herald.ingest`'s `lease_to`, `migrations/functions/ingest.sql`) and hands their ids here;
/// the dispatch loops take them into their next claim (`herald.claim_sends`' `held`), which
/// reads them beside the deliveries it claims, without writing them again. That saves each of
/// them the claim's update of its row, and the wait for the database's wake-up. Nobody else is
/// woken for them: the NOTIFY that wakes dispatch goes out only for deliveries a claim can take
/// now (`herald.notify_worker`'s `herald.wakes_itself`).
///
/// What is reserved is bounded: ingest leases no more than ``room``, so a daemon holds only
/// what its dispatch takes within moments, and the rest stay queued for any daemon. A dispatch
/// batch takes up to its size from here, and claims from the queue at least ``queueShare`` of
/// its size however many wait here, so deliveries already queued (a backlog, retries,
/// scheduled sends coming due) keep their turn. At shutdown what is still here is given back
/// (``SQL/release``); after a crash, the leases run out and any daemon's claim takes the
/// deliveries, as for any claim a crash left. The claim reads a delivery from here only while
/// it is as ingest leased it and half its lease is left; one that waited longer (the database
/// away) is left to its lease, then claimed anew.
public final class BirthLeases: Sendable {
    private struct Handed {
        var ids: [Int64]
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

        var room: Int { closed ? 0 : max(0, capacity - count - reserved) }
    }
    private let state: Mutex<State>
    private let wake: @Sendable () -> Void

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
    ///   - wake: wakes the dispatch loops when deliveries arrive.
    public init(capacity: Int, wake: @escaping @Sendable () -> Void) {
        state = Mutex(State(capacity: capacity))
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
    /// it; none when it failed) to dispatch, and wakes it. Returns those refused because
    /// dispatch has stopped: the caller gives them back.
    func hand(_ ids: [Int64], reserved: Int, leasedAt: ContinuousClock.Instant) -> [Int64] {
        let accepted = state.withLock { state -> Bool in
            state.reserved -= reserved
            guard !ids.isEmpty else { return true }
            guard !state.closed else { return false }
            state.handed.append(Handed(ids: ids, leasedAt: leasedAt))
            state.count += ids.count
            return true
        }
        guard accepted else { return ids }
        if !ids.isEmpty { wake() }
        return []
    }

    /// Takes up to `limit` deliveries, oldest first, with the earliest time their leases were
    /// asked for. Wakes another loop if some are left.
    func take(upTo limit: Int) -> (ids: [Int64], leasedAt: ContinuousClock.Instant?) {
        let (taken, leasedAt, left) = state.withLock { state in
            var taken: [Int64] = []
            var leasedAt: ContinuousClock.Instant?
            while taken.count < limit, !state.handed.isEmpty {
                let wanted = limit - taken.count
                leasedAt = min(leasedAt ?? state.handed[0].leasedAt, state.handed[0].leasedAt)
                if state.handed[0].ids.count <= wanted {
                    taken += state.handed.removeFirst().ids
                } else {
                    taken += state.handed[0].ids.prefix(wanted)
                    state.handed[0].ids.removeFirst(wanted)
                }
            }
            state.count -= taken.count
            return (taken, leasedAt, state.count)
        }
        if left > 0 { wake() }
        return (taken, leasedAt)
    }

    /// Puts back, first in line, deliveries a claim took but could not read (the database
    /// away): they are still leased to this daemon, and the next claim tries them again.
    /// Returns them if dispatch has stopped meanwhile: the caller gives them back.
    func putBack(_ ids: [Int64], leasedAt: ContinuousClock.Instant) -> [Int64] {
        guard !ids.isEmpty else { return [] }
        return state.withLock { state in
            guard !state.closed else { return ids }
            state.handed.insert(Handed(ids: ids, leasedAt: leasedAt), at: 0)
            state.count += ids.count
            return []
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
            return state.handed.flatMap(\.ids)
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
