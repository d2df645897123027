import HeraldPostgres
import HeraldQueue
import Logging
import Synchronization

/// The leases of a dispatch loop's sends in flight, kept while each route sends: a send may
/// take longer than the lease (a route answering slowly, its requests queued behind a full
/// window, a token fetch), and a lease that ran out mid-send would let another worker claim and
/// send its deliveries again. At each half-life of a send's lease, one statement extends it for
/// the deliveries this worker still holds (``DispatchWorker/SQL/extendLeases``), for up to
/// ``DispatchWorker/longestSend``.
///
/// One timer serves every send (``LazyTimer``): most sends end long before their first
/// renewal, and a task sleeping through each one's lease cost more than the send's bookkeeping.
final class LeaseRenewals: Sendable {
    private struct Send {
        let ids: [Int64]
        let claimedAt: ContinuousClock.Instant
        /// When the lease held now ends.
        var heldUntil: ContinuousClock.Instant
        /// When to extend it next; nil while an extension runs, or once the send is given up.
        var renewAt: ContinuousClock.Instant?
    }
    private struct State {
        var nextToken = 0
        var sends: [Int: Send] = [:]
    }
    private let state = Mutex(State())
    private let timer: LazyTimer
    private let context: WorkerContext

    init(context: WorkerContext) {
        self.context = context
        timer = LazyTimer(clock: context.monotonicClock)
    }

    /// Keeps the leases of a send's deliveries `ids`, asked for at `claimedAt`, until
    /// ``end(_:)`` is called with the token returned.
    func start(_ ids: [Int64], claimedAt: ContinuousClock.Instant) -> Int {
        let heldUntil = claimedAt.advanced(by: context.lease)
        let renewAt = heldUntil - context.lease / 2
        let token = state.withLock { state in
            state.nextToken += 1
            state.sends[state.nextToken] = Send(ids: ids, claimedAt: claimedAt, heldUntil: heldUntil, renewAt: renewAt)
            return state.nextToken
        }
        schedule(renewAt)
        return token
    }

    /// The send is done: its leases are kept no longer. Returns when the lease held now ends
    /// (recording stops retrying then).
    func end(_ token: Int) -> ContinuousClock.Instant {
        state.withLock { $0.sends.removeValue(forKey: token)?.heldUntil } ?? context.monotonicClock.now
    }

    private func schedule(_ renewAt: ContinuousClock.Instant) {
        timer.ensure(by: renewAt) { [weak self] in self?.renewDue() }
    }

    /// Starts the extensions that are due; returns when the next one is.
    private func renewDue() -> ContinuousClock.Instant? {
        let now = context.monotonicClock.now
        var due: [(token: Int, ids: [Int64])] = []
        var givenUp: [Int64] = []
        let next = state.withLock { state -> ContinuousClock.Instant? in
            var next: ContinuousClock.Instant?
            for (token, send) in state.sends {
                guard let renewAt = send.renewAt else { continue }
                guard renewAt <= now else {
                    next = min(next ?? renewAt, renewAt)
                    continue
                }
                state.sends[token]?.renewAt = nil
                if send.heldUntil - send.claimedAt >= DispatchWorker.longestSend {
                    givenUp += send.ids
                } else {
                    due.append((token, send.ids))
                }
            }
            return next
        }
        if !givenUp.isEmpty {
            // A send out this long is not coming back (every request has a timeout): its leases
            // run out, and the deliveries are claimed again, as after a crash.
            context.logger.error(
                "a route's send has not returned in 10 minutes; its deliveries' leases are left to run out",
                metadata: ["deliveries": "\(givenUp.count)"])
        }
        for send in due {
            Task { await self.extend(send.token, send.ids) }
        }
        return next
    }

    /// Extends one send's leases; tries again in a second if the database is away.
    private func extend(_ token: Int, _ ids: [Int64]) async {
        let asked = context.monotonicClock.now
        var renewAt: ContinuousClock.Instant
        do {
            try await context.connection.query(
                DispatchWorker.SQL.extendLeases, [ids, context.workerID, context.clock.now(), context.lease.seconds],
                planning: .eachCall)
            let heldUntil = asked.advanced(by: context.lease)
            renewAt = heldUntil - context.lease / 2
            state.withLock { $0.sends[token]?.heldUntil = heldUntil }
        } catch {
            context.logger.warning(
                "could not extend the leases of a slow route's deliveries; trying again",
                metadata: ["error": "\(error)", "deliveries": "\(ids.count)"])
            renewAt = context.monotonicClock.now + .seconds(1)
        }
        let sending = state.withLock { state -> Bool in
            guard state.sends[token] != nil else { return false }
            state.sends[token]?.renewAt = renewAt
            return true
        }
        if sending { schedule(renewAt) }
    }
}
