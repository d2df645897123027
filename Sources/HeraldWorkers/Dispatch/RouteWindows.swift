import Foundation
import HeraldCore
import HeraldQueue
import Logging
import Metrics
import Synchronization

/// What each route (an app's FCM, its iOS through FCM, its APNs, each push service of its
/// browsers) has in flight across the daemon's dispatch loops: sent and not yet answered. (Not
/// recorded: a record held up by the database, in a failover, is no sign of a slow provider.)
///
/// A claim sends every route at once and records together what answers promptly
/// (``RouteCollector``); a route still sending after that is left to record its own outcomes
/// later, and stays in flight here until its provider answers. A route with a send out for
/// more than ``slowAfter`` when the next claim comes is slow: that claim does not wait for it,
/// and gives it only what room its window has (the claim's size, at least ``smallestWindow``),
/// so a slow route holds about one claim's worth of sends; the rest waits, postponed without
/// spending an attempt, from about as long as the route's oldest send has been out (1 to 10 s),
/// spread out at the pace the route sends (up to a minute), so that a large backlog of a slow
/// route does not come back to every claim.
/// Saturation shows as `herald_route_saturated_total`, and at most once a minute per route as a
/// warning in the log and a row of `herald.route_saturation` (which `herald status` lists);
/// `herald_route_in_flight` is each route's current count.
final class RouteWindows: Sendable {
    /// The shortest and longest a postponed delivery of a slow route waits before it is claimed
    /// again.
    static let shortestWait: Duration = .seconds(1)
    static let longestWait: Duration = .seconds(10)
    /// A route whose oldest send in flight is older than this is slow.
    static let slowAfter: Duration = .seconds(1)
    /// The least a slow route may have in flight, however small the claims are (they start
    /// small, at `BatchSizer.smallest`, and grow under load).
    static let smallestWindow = 100

    /// The longest a postponed delivery of a slow route is spread out to (see ``admit``).
    static let longestSpread: Duration = .seconds(60)

    /// What a claim may send on one route: `count` deliveries now (under `ticket`, to release
    /// when they are answered), whether the claim waits for them (the route had nothing in
    /// flight), and how long each of the rest should wait, in order.
    struct Admission: Sendable {
        var count: Int
        var ticket: UInt64
        var awaited: Bool
        var waits: [Duration]
    }

    private struct Route {
        /// Sends in flight, by ticket: how many deliveries, and when they started.
        var sends: [UInt64: (count: Int, started: ContinuousClock.Instant)] = [:]
        var lastWarned: ContinuousClock.Instant?
        /// Postponed since saturation was last reported.
        var unreported = 0
        /// When the next postponed delivery is due again.
        var nextSlot: ContinuousClock.Instant?
        var inFlight: Int { sends.values.reduce(0) { $0 + $1.count } }
        var oldest: ContinuousClock.Instant? { sends.values.map(\.started).min() }
    }

    private struct State {
        var routes: [DispatchWorker.RouteKey: Route] = [:]
        var nextTicket: UInt64 = 0
    }

    private let state = Mutex(State())
    private let clock: any MonotonicClock

    init(clock: any MonotonicClock = ContinuousClock()) { self.clock = clock }

    /// Admits what the route's window has room for: everything when nothing of it is in flight.
    func admit(_ key: DispatchWorker.RouteKey, count: Int, window: Int) -> Admission {
        let now = clock.now
        let admission = state.withLock { state -> Admission in
            var route = state.routes[key] ?? Route()
            let age = route.oldest.map { now - $0 } ?? .zero
            // Slow: a send of it has been out for a second. One still younger (its first send
            // fetching a token, say) is healthy: taken whole and waited for.
            let slow = !route.sends.isEmpty && age >= Self.slowAfter
            let room = max(window, Self.smallestWindow)
            let taken = slow ? min(count, max(0, room - route.inFlight)) : count
            // What waits comes back at about the pace the route sends (a window per age of its
            // oldest send), from about that age on: a slow route's backlog is claimed again at
            // the rate it can be sent, not all of it at every claim, which would take the
            // claims from the healthy routes. Spread out to a minute at most.
            var waits: [Duration] = []
            if taken < count {
                let spacing = max(age, Self.slowAfter) / room
                var slot = max(now + min(max(age, Self.shortestWait), Self.longestWait), route.nextSlot ?? now)
                waits.reserveCapacity(count - taken)
                for _ in taken..<count {
                    waits.append(min(slot - now, Self.longestSpread))
                    slot += spacing
                }
                route.nextSlot = min(slot, now + Self.longestSpread)
            }
            state.nextTicket += 1
            if taken > 0 { route.sends[state.nextTicket] = (taken, now) }
            state.routes[key] = route
            return Admission(count: taken, ticket: state.nextTicket, awaited: !slow, waits: waits)
        }
        if admission.count > 0 { gauge(key) }
        return admission
    }

    /// A send of the route was answered: its room is free again.
    func release(_ key: DispatchWorker.RouteKey, ticket: UInt64) {
        state.withLock { state in
            state.routes[key]?.sends[ticket] = nil
            if let route = state.routes[key], route.sends.isEmpty,
                route.lastWarned.map({ clock.now - $0 >= .seconds(60) }) ?? true
            {
                state.routes[key] = nil
            }
        }
        gauge(key)
    }

    /// What a route's saturation comes to since it was last reported: its sends in flight now,
    /// and the deliveries its full window postponed meanwhile.
    struct Saturation: Sendable {
        var inFlight: Int
        var postponed: Int
    }

    /// Counts what a full window postponed; once a minute per route, says so in the log and
    /// returns what to record for `herald status` (nil in between).
    @discardableResult
    func noteSaturated(_ key: DispatchWorker.RouteKey, postponed: Int, logger: Logger) -> Saturation? {
        Counter(label: "herald_route_saturated_total", dimensions: dimensions(key)).increment(by: postponed)
        let now = clock.now
        let report = state.withLock { state -> Saturation? in
            var route = state.routes[key] ?? Route()
            route.unreported += postponed
            defer { state.routes[key] = route }
            guard route.lastWarned.map({ now - $0 >= .seconds(60) }) ?? true else { return nil }
            route.lastWarned = now
            defer { route.unreported = 0 }
            return Saturation(inFlight: route.inFlight, postponed: route.unreported)
        }
        if let report {
            logger.warning(
                "a route is slow and its window is full: its other deliveries wait, the other routes go on",
                metadata: [
                    "app": "\(key.app)", "route": "\(key.route.description)", "origin": "\(key.origin ?? "")",
                    "in_flight": "\(report.inFlight)", "postponed": "\(report.postponed)",
                ])
        }
        return report
    }

    func inFlight(_ key: DispatchWorker.RouteKey) -> Int {
        state.withLock { $0.routes[key]?.inFlight ?? 0 }
    }

    private func gauge(_ key: DispatchWorker.RouteKey) {
        // The route's total over its origins, as the label names no origin.
        let total = state.withLock { state in
            state.routes.filter { $0.key.app == key.app && $0.key.route == key.route }.values.reduce(0) {
                $0 + $1.inFlight
            }
        }
        Gauge(label: "herald_route_in_flight", dimensions: dimensions(key)).record(total)
    }

    /// Labels for the route metrics. Not the origin: any browser can name a new host under an
    /// allowed pattern, and each would be a series of its own; the log names it.
    private func dimensions(_ key: DispatchWorker.RouteKey) -> [(String, String)] {
        [("app", key.app), ("route", key.route.name)]
    }
}

/// Gathers the answers of one claim's routes for one record: those of the routes the claim
/// waits for, and of any other that answers before the claim records. Once the claim has
/// collected, a route that answers later records its own outcomes.
final class RouteCollector: Sendable {
    /// Once the first awaited route has answered, the others get as long again (at least
    /// this) before the claim records without them.
    static let shortestGrace: Duration = .milliseconds(20)
    /// The longest a claim waits for its routes' answers.
    static let longestWait: Duration = .seconds(1)

    private struct State {
        var results: [Int64: DeliveryResult] = [:]
        var problems: [DispatchWorker.ProblemKey: String?] = [:]
        var answered = 0
        var firstAnswer: ContinuousClock.Instant?
        var closed = false
        /// Set once the claim collects: how many routes it waits for, since when, and its wait.
        var awaiting: Int?
        var started: ContinuousClock.Instant
        var waiter: CheckedContinuation<Void, Never>?

        /// When the claim records without the routes still sending.
        var deadline: ContinuousClock.Instant {
            let longest = started + RouteCollector.longestWait
            guard let first = firstAnswer else { return longest }
            return min(longest, first + max(RouteCollector.shortestGrace, first - started))
        }

        func isDone(at now: ContinuousClock.Instant) -> Bool {
            answered >= (awaiting ?? .max) || now >= deadline
        }
    }

    private let state: Mutex<State>
    /// The dispatch loop's timer for its collectors' deadlines (one collects at a time).
    private let timer: LazyTimer

    init(timer: LazyTimer) {
        self.timer = timer
        state = Mutex(State(started: timer.clock.now))
    }

    /// Takes a route's answers into the claim's record; false once the claim has recorded
    /// without them (the route records its own).
    func take(
        _ results: [Int64: DeliveryResult], _ problems: [DispatchWorker.ProblemKey: String?],
        awaited: Bool
    ) -> Bool {
        let now = timer.clock.now
        var ended: CheckedContinuation<Void, Never>?
        var grace: ContinuousClock.Instant?
        let taken = state.withLock { state in
            guard !state.closed else { return false }
            state.results.merge(results) { first, _ in first }
            // A problem found by any route wins over another's all-clear.
            for (key, problem) in problems {
                if let problem {
                    state.problems[key] = .some(problem)
                } else if state.problems[key] == nil {
                    state.problems[key] = .some(nil)
                }
            }
            if awaited {
                state.answered += 1
                let first = state.firstAnswer == nil
                if first { state.firstAnswer = now }
                if state.waiter != nil {
                    if state.isDone(at: now) {
                        ended = state.waiter
                        state.waiter = nil
                    } else if first {
                        grace = state.deadline
                    }
                }
            }
            return true
        }
        ended?.resume()
        if let grace { timer.ensure(by: grace) { [weak self] in self?.endWaitIfDue() } }
        return taken
    }

    /// Waits until the `awaiting` routes have answered, or the grace after the first answer
    /// (or ``longestWait``) has passed; returns what was taken, and takes nothing more.
    func collect(awaiting: Int) async -> (
        [Int64: DeliveryResult], [DispatchWorker.ProblemKey: String?]
    ) {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = timer.clock.now
            let deadline = state.withLock { state -> ContinuousClock.Instant? in
                state.awaiting = awaiting
                state.started = now
                if state.isDone(at: now) { return nil }
                state.waiter = continuation
                return state.deadline
            }
            if let deadline {
                timer.ensure(by: deadline) { [weak self] in self?.endWaitIfDue() }
            } else {
                continuation.resume()
            }
        }
        return state.withLock { state in
            state.closed = true
            // Late routes keep this collector until they finish: let go of what was taken.
            defer { (state.results, state.problems) = ([:], [:]) }
            return (state.results, state.problems)
        }
    }

    /// Ends the claim's wait once its deadline has come; returns the deadline otherwise.
    private func endWaitIfDue() -> ContinuousClock.Instant? {
        let now = timer.clock.now
        let (ended, next) = state.withLock { state -> (CheckedContinuation<Void, Never>?, ContinuousClock.Instant?) in
            guard let waiter = state.waiter else { return (nil, nil) }
            guard state.isDone(at: now) else { return (nil, state.deadline) }
            state.waiter = nil
            return (waiter, nil)
        }
        ended?.resume()
        return next
    }
}

/// The sends a dispatch loop started and has not yet recorded, so that shutdown (and a test's
/// drain) can wait for them.
final class InFlightTasks: Sendable {
    private let tasks = Mutex<[UInt64: Task<Void, Never>]>([:])
    private let next = Atomic<UInt64>(0)

    func start(_ work: @escaping @Sendable () async -> Void) {
        let id = next.add(1, ordering: .relaxed).newValue
        tasks.withLock { tasks in
            tasks[id] = Task { [weak self] in
                await work()
                _ = self?.tasks.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// Waits until every send started so far, and any started meanwhile, is done.
    func waitAll() async {
        while true {
            let pending = tasks.withLock { Array($0.values) }
            if pending.isEmpty { return }
            for task in pending { await task.value }
        }
    }
}
