import Foundation
import HeraldCore
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

/// Sends deliveries and records what became of each. The deliveries are the queue: each claim
/// leases the due ones (``SQL/claim``: `herald.claim_batch` in
/// `migrations/functions/dispatch.sql`), and each is recorded when its provider answered.
///
/// Per claim: deliveries that cannot or need not be sent end at once (``DeliveryLife``); the
/// rest are split into routes (an app's FCM, its iOS through FCM, its APNs, each push service
/// of its browsers), and every route is sent at once through its provider (``FCMRoute``,
/// ``APNsRoute``, ``WebPushRoute``). What the routes answer promptly is recorded together, in
/// one statement with the leases released, the devices whose token a provider declared dead,
/// and the app configurations found failing or working; a route still sending then records its
/// own outcomes when its answers come in, so a slow provider holds back only its own
/// deliveries. Each route's window (``RouteWindows``) bounds what it has in flight, and its
/// deliveries stay leased while it sends. If the database is away when outcomes are recorded,
/// they are kept and recorded when it is back, within the lease.
///
/// A delivery is `sent` only after its provider accepted it. A crash between the send and the
/// record leaves the delivery leased; when the lease ends it is due again and sent again
/// (at-least-once): the duplicate window is the sends in flight.
public struct DispatchWorker: BatchWorker {
    public let kind = WorkerKind.dispatch.rawValue
    let context: WorkerContext
    let builder: PayloadBuilder
    /// Each route's deliveries in flight (shared by the daemon's dispatch loops through its
    /// senders), and the sends this loop has started.
    var windows: RouteWindows { context.senders?.routeWindows ?? ownWindows }
    private let ownWindows: RouteWindows
    let inFlight = InFlightTasks()
    /// The leases of this loop's sends in flight, kept while they send.
    let leaseRenewals: LeaseRenewals
    /// Ends a claim's wait for its routes' answers (``RouteCollector``).
    let collectorTimer: LazyTimer
    /// Small batches' outcomes held to be recorded together; nil when each is recorded at once
    /// (a record window of zero).
    let recordGatherer: RecordGatherer?
    /// The setups of the apps this loop sends for, read again when an app's row changes.
    let appSetups = AppSetups()
    /// The routes a claim names (`herald.routes`).
    let routes = RouteCatalog()
    /// The providers it sends through, by name.
    var providers: [String: any ProviderRoute.Type] { context.senders?.providers ?? Self.compiledIn }
    static let compiledIn = Providers.byName(Providers.compiledIn)
    let claimTimer = StatementTimer(kind: WorkerKind.dispatch.rawValue, .claim)
    let recordTimer = StatementTimer(kind: WorkerKind.dispatch.rawValue, .record)
    private let sendDuration = Metrics.Timer(label: "herald_send_batch_duration_seconds")

    /// `recordWindow`: how long it holds a small batch's outcomes to record them with the next
    /// ones (``RecordGatherer``; the daemon's is ``recordWindow``); zero records each batch's at
    /// once. `publicURL`: the public base URL of Herald's HTTP endpoint (`HERALD_PUBLIC_URL`),
    /// under which payloads carry a report URL; nil: they carry the reference only.
    public init(context: WorkerContext, recordWindow: Duration = .zero, publicURL: String? = nil) {
        self.context = context
        builder = PayloadBuilder(reportBaseURL: publicURL)
        leaseRenewals = LeaseRenewals(context: context)
        ownWindows = RouteWindows(clock: context.monotonicClock)
        collectorTimer = LazyTimer(clock: context.monotonicClock)
        recordGatherer =
            recordWindow > .zero ? RecordGatherer(window: recordWindow, clock: context.monotonicClock) : nil
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let catalog = try await routes.contents(connection: context.connection)
        // Read before the wall time the claim leases until, so that what Swift takes for a
        // lease's end is never later than the database's.
        let startedAt = context.monotonicClock.now
        let now = context.clock.now()
        let (rows, claimedAt) = try await claimBatch(limit: limit, now: now, startedAt: startedAt)
        let (claimed, unreadable, versions) = read(rows, catalog: catalog, now: now)
        guard !claimed.isEmpty || !unreadable.isEmpty else { return 0 }
        let apps: [String: AppSetup]
        do {
            apps = try await appSetups.setups(versions, connection: context.connection)
        } catch {
            // The deliveries are leased: give them back (not an attempt) rather than leave them
            // to their lease.
            context.logger.warning(
                "could not read the apps' setups; giving the claim back", metadata: ["error": "\(error)"])
            var givenBack = unreadable
            for delivery in claimed {
                givenBack[delivery.deliveryID] = DeliveryLife.next(
                    delivery, after: .crowdedOut(wait: RouteWindows.shortestWait), now: now, backoff: context.backoff)
            }
            await recordOutcomes(
                givenBack, of: claimed, problems: [:], leaseEnds: claimedAt.advanced(by: context.lease), now: now)
            return claimed.count + unreadable.count
        }

        var (settled, routes) = decide(claimed, now: now)
        settled.merge(unreadable) { decided, _ in decided }
        // Every route is sent at once. The claim records together, in one statement, what the
        // routes answer promptly; a route still sending once the others are done (and a grace
        // as long again) is left to record its own outcomes when its answers come in, and the
        // loop claims again: a slow provider holds back only its own deliveries. A route with
        // sends still in flight from earlier claims is known slow and is not waited for at all;
        // its window bounds what it may have in flight, and what does not fit waits (postponed,
        // not an attempt).
        let collector = RouteCollector(timer: collectorTimer)
        var awaited = 0
        for (key, batch) in routes {
            let admission = windows.admit(key, count: batch.count, window: limit)
            for (delivery, wait) in zip(batch.dropFirst(admission.count), admission.waits) {
                settled[delivery.deliveryID] = DeliveryLife.next(
                    delivery, after: .crowdedOut(wait: wait), now: now, backoff: context.backoff)
            }
            if admission.count < batch.count,
                let saturation = windows.noteSaturated(
                    key, postponed: batch.count - admission.count, logger: context.logger)
            {
                inFlight.start { [self] in await recordSaturation(key, saturation, now: now) }
            }
            guard admission.count > 0 else { continue }
            let part = Array(batch.prefix(admission.count))
            if admission.awaited { awaited += 1 }
            // The task only calls a method: see ChannelWorker.handle (#40).
            inFlight.start { [self, apps] in
                await sendRoute(
                    key, part, app: apps[key.app], admission: admission, collector: collector, builder: builder,
                    claimedAt: claimedAt, now: now)
            }
        }
        let (answered, problems) = await collector.collect(awaiting: awaited)
        settled.merge(answered) { decided, _ in decided }
        if !settled.isEmpty || !problems.isEmpty {
            await recordOutcomes(
                settled, of: claimed, problems: problems, leaseEnds: claimedAt.advanced(by: context.lease), now: now)
        }
        return claimed.count + unreadable.count
    }

    /// Records that a route's window is full, for `herald status` (``SQL/recordSaturation``).
    func recordSaturation(_ key: RouteKey, _ saturation: RouteWindows.Saturation, now: Date) async {
        do {
            try await context.connection.query(
                SQL.recordSaturation,
                [
                    key.app, key.route.name, key.origin ?? "", context.workerID, now, saturation.inFlight,
                    saturation.postponed,
                ])
        } catch {
            context.logger.warning("could not record a saturated route", metadata: ["error": "\(error)"])
        }
    }

    /// Waits for the routes' sends still in flight to be recorded (at shutdown, or at the end
    /// of a test's drain), records the outcomes held (a window's wait at most), and gives back
    /// the deliveries leased at birth that no loop took.
    public func finish() async {
        if let births = context.births { await BirthLeases.release(births.close(), context: context) }
        recordGatherer?.close()
        await writeHeld()
        await inFlight.waitAll()
    }

    /// How long the daemon's dispatch holds a small batch's outcomes for the next ones, when
    /// records follow each other closer than this (``RecordGatherer``): long enough for a
    /// trickle's sends to share a record, far shorter than a provider's answer takes over the
    /// internet, so it widens the window of a crash's duplicates by as little.
    public static let recordWindow: Duration = .milliseconds(10)

    /// The longest a send keeps its deliveries leased: far beyond any request's timeout
    /// (`HERALD_HTTP_TIMEOUT`) and an FCM quota's wait, so only a send that will never return
    /// lets its leases run out.
    static let longestSend: Duration = .seconds(600)

    /// Sends one route's admitted part, keeping its leases, and hands the answers to the
    /// claim's `collector`, or records them itself when they come in late.
    func sendRoute(
        _ key: RouteKey, _ part: [OutgoingDelivery], app: AppSetup?, admission: RouteWindows.Admission,
        collector: RouteCollector, builder: PayloadBuilder, claimedAt: ContinuousClock.Instant, now: Date
    ) async {
        let ((results, problems), heldUntil) = await keepingLeases(of: part, claimedAt: claimedAt) {
            await send(route: key, part, app: app, builder: builder, now: now)
        }
        // The provider has answered: the room is free, whenever the outcomes are recorded.
        // (A record kept waiting by a failover must not make the route look slow, or
        // the deliveries claimed after it would be postponed for up to a minute.)
        windows.release(key, ticket: admission.ticket)
        if !collector.take(results, problems, awaited: admission.awaited) {
            // Late: recorded on its own, at its own time. It reports only the problems
            // it found: its all-clear could undo a problem another route (of the same
            // scope) found meanwhile; probes and the retry worker clear them.
            await recordOutcomes(
                results, of: part, problems: problems.filter { $0.value != nil }, leaseEnds: heldUntil,
                now: context.clock.now())
        }
    }

    /// Runs one route's send while keeping its deliveries leased (``LeaseRenewals``). Returns the
    /// send's result and when the lease held now ends (recording stops retrying then, see
    /// ``recordOutcomes``).
    func keepingLeases<Result: Sendable>(
        of part: [OutgoingDelivery], claimedAt: ContinuousClock.Instant, _ send: () async -> Result
    ) async -> (Result, ContinuousClock.Instant) {
        let token = leaseRenewals.start(part.map(\.deliveryID), claimedAt: claimedAt)
        let result = await send()
        return (result, leaseRenewals.end(token))
    }

    /// Decides every claimed delivery that is not sent (``DeliveryLife``): those that cannot or
    /// need not be sent end here, and a route whose configuration is failing sends one probe
    /// and postpones the rest. Returns their results, and the deliveries to send by route.
    func decide(_ claimed: [OutgoingDelivery], now: Date) -> (
        settled: [Int64: DeliveryResult], routes: [RouteKey: [OutgoingDelivery]]
    ) {
        var results: [Int64: DeliveryResult] = [:]
        var sendable: [RouteKey: [OutgoingDelivery]] = [:]
        var rescued: [String: Int] = [:]
        for delivery in claimed {
            if let worker = delivery.abandonedBy { rescued[worker, default: 0] += 1 }
            if let ended = DeliveryLife.next(delivery, after: .claimed, now: now, backoff: context.backoff) {
                results[delivery.deliveryID] = ended
            } else if let route = delivery.route {
                var origin: String? = nil
                if case .subscription(_, let endpoint, _, _) = delivery.target {
                    origin = String(HTTPRequest.origin(of: endpoint))
                }
                sendable[RouteKey(app: delivery.appID, route: route, origin: origin), default: []].append(delivery)
            }
        }
        for (worker, count) in rescued {
            context.logger.warning(
                "took over deliveries whose lease ran out",
                metadata: ["abandoned_by": "\(worker)", "count": "\(count)"])
        }

        // A route whose configuration is failing gets one probe a minute, not a send per message;
        // the app's other routes go on at full speed.
        for (key, batch) in sendable {
            guard let failedAt = batch[0].configurationFailedAt else { continue }
            var probes: [OutgoingDelivery] = []
            for (index, delivery) in batch.enumerated() {
                let event = DeliveryLife.Event.configurationFailing(
                    failedAt: failedAt, probe: index == 0, route: key.route.description)
                if let waiting = DeliveryLife.next(delivery, after: event, now: now, backoff: context.backoff) {
                    results[delivery.deliveryID] = waiting
                } else {
                    probes.append(delivery)
                }
            }
            sendable[key] = probes.isEmpty ? nil : probes
        }
        return (results, sendable)
    }

    /// Sends one route's deliveries through its provider; returns a result per delivery and
    /// the configuration problems its answers show: each of its scopes found failing, or (nil)
    /// working again when none was found.
    func send(route key: RouteKey, _ batch: [OutgoingDelivery], app: AppSetup?, builder: PayloadBuilder, now: Date)
        async -> ([Int64: DeliveryResult], [ProblemKey: String?])
    {
        let started = context.monotonicClock.now
        let events = await providerSend(route: key, batch, app: app, builder: builder, now: now)
        sendDuration.record(duration: context.monotonicClock.now - started)
        var results: [Int64: DeliveryResult] = [:]
        var found: [ConfigurationScope: String] = [:]
        for (delivery, event) in events {
            if case .sent(.configurationError(let reason, let scope), _, _) = event { found[scope] = reason }
            results[delivery.deliveryID] = DeliveryLife.next(delivery, after: event, now: now, backoff: context.backoff)
        }
        var problems: [ProblemKey: String?] = [:]
        // A route that found a problem tells nothing of its other scopes; one that found none
        // clears those of every scope it depends on.
        for (scope, problem) in found { problems[ProblemKey(app: key.app, scope: scope)] = .some(problem) }
        // Only an answer, or what Herald found when it tried, tells: deliveries that waited (a
        // full window, a paused FCM project) tried nothing.
        let tried = events.contains { _, event in
            if case .crowdedOut = event { false } else { true }
        }
        if found.isEmpty && tried {
            for scope in key.route.scopes { problems[ProblemKey(app: key.app, scope: scope)] = .some(nil) }
        }
        for (problemKey, problem) in problems {
            if let problem,
                await context.senders?.shouldLog(app: problemKey.app, scope: problemKey.scope, problem: problem) ?? true
            {
                context.logger.error(
                    "the app's configuration is refused",
                    metadata: [
                        "app": "\(problemKey.app)", "scope": "\(problemKey.scope.rawValue)", "error": "\(problem)",
                    ])
            }
        }
        return (results, problems)
    }

    /// The route's provider sends it; a route that cannot be made fails its deliveries as a
    /// configuration problem of its first scope (the app's FCM credentials for both FCM routes).
    func providerSend(
        route key: RouteKey, _ batch: [OutgoingDelivery], app: AppSetup?, builder: PayloadBuilder, now: Date
    ) async -> [(OutgoingDelivery, DeliveryLife.Event)] {
        let made: Result<any ProviderRoute, ConfigurationProblem>
        if let senders = context.senders, let app, let provider = providers[key.route.provider] {
            made = await senders.route(of: provider, app: app)
        } else {
            made = .failure(
                ConfigurationProblem(app == nil ? "app \(key.app) is not in herald.apps" : "no senders configured"))
        }
        switch made {
        case .success(let route):
            return await route.send(batch, builder: builder, now: now, context: context)
        case .failure(let problem) where problem.herald:
            // Herald's own trouble: the deliveries wait (no attempt counted), the app is not blamed.
            if await context.senders?.shouldLog(app: key.app, scope: key.route.scopes[0], problem: problem.description)
                ?? true
            {
                context.logger.error(
                    "cannot set up an app's route; its deliveries wait",
                    metadata: ["app": "\(key.app)", "error": "\(problem)"])
            }
            return batch.map { ($0, .crowdedOut(wait: .seconds(10))) }
        case .failure(let problem):
            let outcome = PushOutcome.configurationError(reason: problem.description, scope: key.route.scopes[0])
            return batch.map { ($0, .sent(outcome, dryRun: $0.notification.dryRun, at: now)) }
        }
    }

    /// One route of one app: what is sent together, and waits together while its
    /// configuration fails.
    struct RouteKey: Hashable {
        var app: String
        var route: OutgoingDelivery.Route
        /// For browsers, the push service's origin: each is a route of its own, since any host a
        /// subscription names may be slow or stuck.
        var origin: String? = nil
    }

    /// One configuration of one app (a row of `herald.app_config_problems`).
    struct ProblemKey: Hashable {
        var app: String
        var scope: ConfigurationScope
    }
}
