import Foundation
import Logging
import Metrics
import Synchronization

/// How many deliveries each route (an app's FCM, its iOS through FCM, its APNs, its browsers)
/// has in flight on one dispatch loop, and so how many leases it holds.
///
/// A route's sends go out on their own and are recorded when its answers are in, while the
/// loop claims again; the window keeps a slow route from taking ever more of the claims. It is
/// the loop's claim size: a route may have one claim's worth in flight. When a claim brings a
/// route more than its window has room for, the claim waits a little for room while the route
/// is healthy (its oldest send is younger than ``slowAfter``: it frees room within
/// milliseconds, and waiting is the back-pressure that keeps the claims at the providers'
/// pace); once the route is slow, what does not fit is postponed at once, by about as long as
/// the route takes, and the other routes go on. Saturation shows as
/// `herald_route_saturated_total` and a warning at most once a minute per route;
/// `herald_route_in_flight` is each route's current count.
final class RouteWindows: Sendable {
    /// A route whose oldest send in flight is older than this is slow: its overflow is
    /// postponed rather than waited for.
    static let slowAfter: Duration = .seconds(1)
    /// The longest a postponed delivery of a slow route waits before it is claimed again.
    static let longestWait: Duration = .seconds(10)

    /// What a claim may send on one route: `count` deliveries now (under `ticket`, to release
    /// when they are recorded), and how long the rest should wait.
    struct Admission: Sendable {
        var count: Int
        var ticket: UInt64? = nil
        var wait: Duration
    }

    private struct Route {
        /// Sends in flight, by ticket: how many deliveries, and when they started.
        var sends: [UInt64: (count: Int, started: ContinuousClock.Instant)] = [:]
        var lastWarned: ContinuousClock.Instant?
        var inFlight: Int { sends.values.reduce(0) { $0 + $1.count } }
        var oldest: ContinuousClock.Instant? { sends.values.map(\.started).min() }
    }

    private struct State {
        var routes: [DispatchWorker.RouteKey: Route] = [:]
        var nextTicket: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Admits what each route has room for: at once where there is room or the route is slow,
    /// otherwise after waiting up to `patience` for room (or until `isStopping`).
    func admit(
        _ wanted: [DispatchWorker.RouteKey: Int], window: Int, patience: Duration,
        isStopping: @Sendable () -> Bool
    ) async -> [DispatchWorker.RouteKey: Admission] {
        var admitted: [DispatchWorker.RouteKey: Admission] = [:]
        var waiting = wanted
        let deadline = ContinuousClock.now + patience
        while !waiting.isEmpty {
            let giveUp = ContinuousClock.now >= deadline || isStopping()
            for (key, count) in waiting {
                if let admission = tryAdmit(key, count: count, window: max(1, window), force: giveUp) {
                    admitted[key] = admission
                    waiting[key] = nil
                }
            }
            if !waiting.isEmpty { try? await Task.sleep(for: .milliseconds(2)) }
        }
        return admitted
    }

    /// Admits `count` deliveries of a route if its window has room; a slow route (or `force`)
    /// gets what room there is, maybe none. Nil: wait for room.
    private func tryAdmit(_ key: DispatchWorker.RouteKey, count: Int, window: Int, force: Bool) -> Admission? {
        let now = ContinuousClock.now
        let admission = state.withLock { state -> Admission? in
            var route = state.routes[key] ?? Route()
            let room = max(0, window - route.inFlight)
            let age = route.oldest.map { now - $0 } ?? .zero
            guard room >= count || age >= Self.slowAfter || force else { return nil }
            let wait = min(max(age, Self.slowAfter), Self.longestWait)
            let taken = min(count, room)
            guard taken > 0 else { return Admission(count: 0, wait: wait) }
            state.nextTicket += 1
            route.sends[state.nextTicket] = (taken, now)
            state.routes[key] = route
            return Admission(count: taken, ticket: state.nextTicket, wait: wait)
        }
        if let admission, admission.count > 0 { gauge(key) }
        return admission
    }

    /// A send of the route is recorded: its room is free again.
    func release(_ key: DispatchWorker.RouteKey, ticket: UInt64) {
        state.withLock { state in
            state.routes[key]?.sends[ticket] = nil
            if state.routes[key]?.sends.isEmpty == true, state.routes[key]?.lastWarned == nil {
                state.routes[key] = nil
            }
        }
        gauge(key)
    }

    /// Counts what a full window postponed, and says so at most once a minute per route.
    func noteSaturated(_ key: DispatchWorker.RouteKey, postponed: Int, logger: Logger) {
        Counter(label: "herald_route_saturated_total", dimensions: dimensions(key)).increment(by: postponed)
        let now = ContinuousClock.now
        let (warn, inFlight) = state.withLock { state -> (Bool, Int) in
            var route = state.routes[key] ?? Route()
            let warn = route.lastWarned.map { now - $0 >= .seconds(60) } ?? true
            if warn { route.lastWarned = now }
            state.routes[key] = route
            return (warn, route.inFlight)
        }
        if warn {
            logger.warning(
                "a route is slow and its window is full: its other deliveries wait, the other routes go on",
                metadata: [
                    "app": "\(key.app)", "route": "\(key.route.description)", "origin": "\(key.origin ?? "")",
                    "in_flight": "\(inFlight)",
                    "postponed": "\(postponed)",
                ])
        }
    }

    func inFlight(_ key: DispatchWorker.RouteKey) -> Int {
        state.withLock { $0.routes[key]?.inFlight ?? 0 }
    }

    private func gauge(_ key: DispatchWorker.RouteKey) {
        Gauge(label: "herald_route_in_flight", dimensions: dimensions(key)).record(inFlight(key))
    }

    private func dimensions(_ key: DispatchWorker.RouteKey) -> [(String, String)] {
        [("app", key.app), ("route", key.route.metricName), ("origin", key.origin ?? "")]
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
