import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics
import Synchronization

/// Sends deliveries and records what became of each. The deliveries are the queue: each claim
/// leases the due ones (``SQL/claim``: `herald.claim_sends` in
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
    let secret = SecretCache()
    /// Each route's deliveries in flight (shared by the daemon's dispatch loops through its
    /// senders), and the sends this loop has started.
    var windows: RouteWindows { context.senders?.routeWindows ?? ownWindows }
    private let ownWindows = RouteWindows()
    let inFlight = InFlightTasks()
    /// The setups of the apps this loop sends for, read again when an app's row changes.
    let appSetups = AppSetups()
    /// The routes a claim names (`herald.routes`).
    let routes = RouteCatalog()
    /// The providers it sends through, by name.
    var providers: [String: any ProviderRoute.Type] { context.senders?.providers ?? Self.compiledIn }
    private static let compiledIn = Providers.byName(Providers.compiledIn)
    private let claimTimer = StatementTimer(kind: WorkerKind.dispatch.rawValue, .claim)
    private let recordTimer = StatementTimer(kind: WorkerKind.dispatch.rawValue, .record)
    private let sendDuration = Metrics.Timer(label: "herald_send_batch_duration_seconds")

    public init(context: WorkerContext) { self.context = context }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let builder = PayloadBuilder(reference: try await secret.reference(context), reportBaseURL: context.publicURL)
        let startedAt = ContinuousClock.now
        let now = context.clock.now()
        // Deliveries ingest leased at birth come first, beside a share claimed from the queue.
        let held = context.births?.take(upTo: limit) ?? (ids: [], leasedAt: nil)
        // The leases end no earlier than this plus the lease.
        let claimedAt = min(startedAt, held.leasedAt ?? startedAt)
        let (claimed, unreadable, versions): ([OutgoingDelivery], [Int64: DeliveryResult], [String: String])
        do {
            let routes = try await routes.routes(connection: context.connection)
            (claimed, unreadable, versions) = try await claim(
                routes: routes,
                limit: BirthLeases.fromQueue(limit: limit, held: held.ids.count), held: held.ids, now: now)
        } catch {
            if let births = context.births, let leasedAt = held.leasedAt {
                await BirthLeases.release(births.putBack(held.ids, leasedAt: leasedAt), context: context)
            }
            throw error
        }
        claimTimer.finished(since: startedAt, rows: claimed.count + unreadable.count, logger: context.logger)
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
        let collector = RouteCollector()
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
    /// of a test's drain), and gives back the deliveries leased at birth that no loop took.
    public func finish() async {
        if let births = context.births { await BirthLeases.release(births.close(), context: context) }
        await inFlight.waitAll()
    }

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

    /// Runs one route's send while keeping its deliveries leased: a send may take longer than
    /// the lease (a route answering slowly, its requests queued behind a full window, a token
    /// fetch), and a lease that ran out mid-send would let another worker claim and send them
    /// again. At each half-life of the lease, one statement extends it for the send's
    /// deliveries this worker still holds, for up to ``longestSend``. Returns the send's result
    /// and when the lease held now ends (recording stops retrying then, see ``recordOutcomes``).
    func keepingLeases<Result: Sendable>(
        of part: [OutgoingDelivery], claimedAt: ContinuousClock.Instant, _ send: () async -> Result
    ) async -> (Result, ContinuousClock.Instant) {
        let lease = context.lease
        let renewals = Task { [context] () -> ContinuousClock.Instant in
            var heldUntil = claimedAt.advanced(by: lease)
            let ids = part.map(\.deliveryID)
            while heldUntil - claimedAt < Self.longestSend {
                do {
                    try await Task.sleep(until: heldUntil - lease / 2, clock: .continuous)
                } catch {
                    return heldUntil  // the send is done
                }
                let asked = ContinuousClock.now
                do {
                    try await context.connection.query(
                        SQL.extendLeases, [ids, context.workerID, context.clock.now(), lease.seconds],
                        planning: .eachCall)
                    heldUntil = asked.advanced(by: lease)
                } catch {
                    if Task.isCancelled { return heldUntil }
                    context.logger.warning(
                        "could not extend the leases of a slow route's deliveries; trying again",
                        metadata: ["error": "\(error)", "deliveries": "\(ids.count)"])
                    try? await Task.sleep(for: .seconds(1))
                    if Task.isCancelled { return heldUntil }
                }
            }
            // A send out this long is not coming back (every request has a timeout): its leases
            // run out, and the deliveries are claimed again, as after a crash.
            context.logger.error(
                "a route's send has not returned in 10 minutes; its deliveries' leases are left to run out",
                metadata: ["deliveries": "\(ids.count)"])
            return heldUntil
        }
        let result = await send()
        renewals.cancel()
        return (result, await renewals.value)
    }

    /// Counts the outcomes and records them with their leases released
    /// (``record(_:disabled:problems:now:)``), keeping them while the database is away until the
    /// lease ends.
    func recordOutcomes(
        _ results: [Int64: DeliveryResult], of batch: [OutgoingDelivery], problems: [ProblemKey: String?],
        leaseEnds: ContinuousClock.Instant, now: Date
    ) async {
        let deliveries = Dictionary(uniqueKeysWithValues: batch.map { ($0.deliveryID, $0) })
        var sendsByOutcome: [String: Int] = [:]
        var finished: [String: Int] = [:]
        for result in results.values {
            sendsByOutcome[Self.metricOutcome(result), default: 0] += 1
            finished[Self.jobOutcome(result), default: 0] += 1
        }
        // One counter update per outcome and batch, not per delivery.
        for (outcome, count) in sendsByOutcome {
            Counter(label: "herald_sends_total", dimensions: [("outcome", outcome)]).increment(by: count)
        }
        countFinished(kind: kind, finished)
        let (disabled, endedActivityTokens) = Self.deadTokens(results, deliveries, providers: providers)
        let recording = ContinuousClock.now
        let recorded = await recordWithinLease(
            until: leaseEnds, logger: context.logger, items: results.count
        ) {
            try await record(
                results, disabled: disabled, endedActivityTokens: endedActivityTokens, problems: problems, now: now)
        }
        recordTimer.finished(since: recording, rows: results.count, logger: context.logger)
        if recorded {
            for token in endedActivityTokens {
                context.logger.notice(
                    "ended a Live Activity token its provider rejected",
                    metadata: [
                        "activity_token": "\(token.id)", "token": "\(tokenHint(token.token))",
                        "reason": "\(token.reason)",
                    ])
            }
            for device in disabled {
                context.logger.notice(
                    "disabled a device whose push token its provider rejected",
                    metadata: [
                        "device": "\(device.id)", "token": "\(tokenHint(device.token))", "reason": "\(device.reason)",
                    ])
            }
        }
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
                if case .browser(let endpoint, _, _) = delivery.target {
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
        let started = ContinuousClock.now
        let events = await providerSend(route: key, batch, app: app, builder: builder, now: now)
        sendDuration.record(duration: ContinuousClock.now - started)
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
            return batch.map { ($0, .sent(outcome, dryRun: $0.dryRun, at: now)) }
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

    /// The delivery's new state, or for one still queued, why: `retry` or `postponed`.
    static func metricOutcome(_ result: DeliveryResult) -> String {
        switch result.requeue {
        case .retry: "retry"
        case .postponed: "postponed"
        case nil: result.state.rawValue
        }
    }

    /// The `outcome` label of `herald_jobs_finished_total`, as for job rows.
    static func jobOutcome(_ result: DeliveryResult) -> String {
        switch result.requeue {
        case .retry: "retry"
        case .postponed: "postponed"
        case nil: result.dead ? "dead" : "completed"
        }
    }

    /// Text a provider wrote (a reason, a message id), as PostgreSQL text can hold it: a NUL
    /// becomes U+FFFD. Whatever a server answers, its record must not fail, or the batch's
    /// sends would be repeated when their lease ends.
    static func storable(_ text: String) -> String {
        text.utf8.contains(0) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    /// Reads the deliveries `held` (leased at birth) and leases up to `limit` due ones beside them
    /// (``SQL/claim``), with the version of each one's app (for ``AppSetups``). A row that
    /// cannot be read (whatever it holds: a value out of Swift's range, a column out of step) is
    /// not sent and ends `failed` with the reason; the rest of the batch goes on.
    func claim(routes: [String: OutgoingDelivery.Route], limit: Int, held: [Int64] = [], now: Date) async throws -> (
        readable: [OutgoingDelivery], unreadable: [Int64: DeliveryResult], appVersions: [String: String]
    ) {
        let rows = try await context.connection.query(
            SQL.claim, [now, limit, context.workerID, context.lease.seconds, held])
        var readable: [OutgoingDelivery] = []
        var unreadable: [Int64: DeliveryResult] = [:]
        var versions: [String: String] = [:]
        readable.reserveCapacity(rows.count)
        for row in rows {
            // The primary key: a bigint, never NULL, so always readable.
            let id: Int64 = try row.decode("delivery_id")
            do {
                let delivery = try Self.delivery(from: row, routes: routes, providers: providers)
                versions[delivery.appID] = try row.decode("app_version")
                readable.append(delivery)
            } catch let unknown as NotSendableHere {
                if case .route = unknown { self.routes.markStale() }
                unreadable[id] = try Self.waiting(unknown, expiresAt: row.decode("expires_at"), now: now)
            } catch {
                unreadable[id] = DeliveryResult(
                    state: .failed, error: "the delivery could not be read for sending, so it was not sent: \(error)")
            }
        }
        if !unreadable.isEmpty {
            context.logger.error(
                "failed deliveries whose rows could not be read; see herald.deliveries.last_error",
                metadata: ["count": "\(unreadable.count)", "deliveries": "\(unreadable.keys.sorted().prefix(10))"])
        }
        return (readable, unreadable, versions)
    }

    /// A claimed delivery this daemon cannot send, though a newer one may: the database (migrated
    /// by a newer Herald, in a rolling upgrade) names a payload kind, a route or a provider this
    /// binary does not have. It waits, with the reason, until a daemon that can sends it or
    /// its notification expires; it is never sent as something else.
    enum NotSendableHere: Error, CustomStringConvertible {
        case payloadKind(String)
        case route(String)
        case provider(OutgoingDelivery.Route)

        var description: String {
            switch self {
            case .payloadKind(let kind): "payload kind \(kind)"
            case .route(let name): "route \(name), which herald.routes did not have when this daemon read it"
            case .provider(let route): "provider \(route.provider) (route \(route.name))"
            }
        }
    }

    /// How long a delivery this daemon cannot send waits before a daemon claims it again.
    static let notSendableHereWait: TimeInterval = 60

    static func waiting(_ unknown: NotSendableHere, expiresAt: Date, now: Date) -> DeliveryResult {
        if expiresAt <= now {
            return DeliveryResult(
                state: .expired,
                error: "expired at \(expiresAt) before a daemon that knows its \(unknown) could send it")
        }
        return DeliveryResult(
            state: .queued,
            error: "waiting: the daemon that claimed it does not know its \(unknown); a daemon that does will send it",
            requeue: .postponed(until: now.addingTimeInterval(notSendableHereWait)))
    }

    static func delivery(
        from row: PostgresRow, routes: [String: OutgoingDelivery.Route], providers: [String: any ProviderRoute.Type]
    ) throws -> OutgoingDelivery {
        let kindName: String = try row.decode("payload_kind")
        guard let kind = OutgoingDelivery.PayloadKind(rawValue: kindName) else {
            throw NotSendableHere.payloadKind(kindName)
        }
        let route = try row.decode("route", as: String?.self).map { name in
            guard let route = routes[name] else { throw NotSendableHere.route(name) }
            guard providers[route.provider] != nil else { throw NotSendableHere.provider(route) }
            return route
        }
        return OutgoingDelivery(
            deliveryID: try row.decode("delivery_id"), notificationID: try row.decode("notification_id"),
            attempts: try row.decode("attempts"), abandonedBy: try row.decode("abandoned_by", as: String?.self),
            payloadKind: kind, deviceRowID: try row.decode("device_id", as: Int64?.self),
            target: try target(from: row, kind: kind), route: route,
            deviceDisabledReason: try row.decode("device_disabled_reason", as: String?.self),
            appID: try row.decode("app_id"),
            title: try row.decode("title", as: String?.self), body: try row.decode("body", as: String?.self),
            data: Self.stringPairs(try row.decode("data", as: String?.self)),
            imageURL: try row.decode("image_url", as: String?.self),
            sound: try row.decode("sound", as: String?.self),
            badge: try row.decode("badge", as: Int?.self),
            androidChannelID: try row.decode("android_channel_id", as: String?.self),
            iosCategory: try row.decode("ios_category", as: String?.self),
            iosThreadID: try row.decode("ios_thread_id", as: String?.self),
            deepLink: try row.decode("deep_link", as: String?.self),
            iosInterruptionLevel: try row.decode("ios_interruption_level", as: String?.self),
            iosRelevanceScore: try row.decode("ios_relevance_score", as: Double?.self),
            iosFilterCriteria: try row.decode("ios_filter_criteria", as: String?.self),
            iosTargetContentID: try row.decode("ios_target_content_id", as: String?.self),
            androidDirectBootOK: try row.decode("android_direct_boot_ok", as: Bool?.self),
            androidProxy: try row.decode("android_proxy", as: String?.self),
            // Ingest sets both before any delivery exists; a NULL here is a bug to hear about.
            priority: try row.decode("priority"), expiresAt: try row.decode("expires_at"),
            collapseKey: try row.decode("collapse_key", as: String?.self), silent: try row.decode("silent"),
            dryRun: try row.decode("dry_run"),
            configurationFailedAt: try row.decode("config_error_at", as: Date?.self),
            liveActivity: kind == .liveActivity || kind == .broadcast ? try liveActivity(from: row, kind: kind) : nil,
            channel: kind == .broadcast
                ? OutgoingDelivery.Channel(
                    name: try row.decode("activity_channel", as: String?.self) ?? "",
                    state: try row.decode("channel_state", as: String?.self),
                    storesLatest: try row.decode("channel_stores_latest", as: Bool?.self) ?? false) : nil)
    }

    /// A Live Activity event's part of the row; nil when its token (a broadcast's channel) or
    /// event is missing (the delivery is then not sent: ``DeliveryLife``).
    static func liveActivity(from row: PostgresRow, kind: OutgoingDelivery.PayloadKind) throws
        -> OutgoingDelivery.LiveActivity?
    {
        let token = try row.decode("activity_token", as: String?.self)
        let tokenRowID = try row.decode("activity_token_id", as: Int64?.self)
        let name = try row.decode(kind == .broadcast ? "activity_channel" : "activity_id", as: String?.self)
        guard kind == .broadcast || (token != nil && tokenRowID != nil), let name,
            let event = OutgoingDelivery.LiveActivity.Event(
                rawValue: try row.decode("activity_event", as: String?.self) ?? ""),
            let eventAt = try row.decode("activity_event_at", as: Date?.self)
        else { return nil }
        return OutgoingDelivery.LiveActivity(
            event: event, activityID: name, token: token, tokenRowID: tokenRowID,
            tokenEndedReason: try row.decode("activity_token_ended", as: String?.self),
            supersededBy: try row.decode("superseded_by", as: Int64?.self),
            attributesType: try row.decode("activity_attributes_type", as: String?.self),
            attributes: try row.decode("activity_attributes", as: String?.self),
            contentState: try row.decode("activity_content_state", as: String?.self),
            staleAt: try row.decode("activity_stale_at", as: Date?.self),
            dismissAt: try row.decode("activity_dismiss_at", as: Date?.self), eventAt: eventAt)
    }

    /// What the delivery is sent to: the notification's topic, or the device's token by its kind.
    static func target(from row: PostgresRow, kind: OutgoingDelivery.PayloadKind) throws -> OutgoingDelivery.Target? {
        if kind == .topic { return try row.decode("topic", as: String?.self).map { .topic($0) } }
        if kind == .broadcast { return try row.decode("channel_id", as: String?.self).map { .channel($0) } }
        guard let token = try row.decode("push_token", as: String?.self) else { return nil }
        let tokenKind: String = try row.decode("token_kind")
        switch OutgoingDelivery.TokenKind(rawValue: tokenKind) {
        case .installationID: return .installationID(token)
        case .apnsDeviceToken: return .apnsDeviceToken(token)
        case .webSubscription:
            return .browser(
                endpoint: token, p256dh: [UInt8](try row.decode("web_p256dh", as: Data?.self) ?? Data()),
                auth: [UInt8](try row.decode("web_auth", as: Data?.self) ?? Data()))
        case .registrationToken: return .registrationToken(token)
        case nil: return .token(kind: tokenKind, token)
        }
    }

    /// A JSON object of strings, in its keys' order.
    static func stringPairs(_ json: String?) -> [(String, String)] {
        guard let json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return []
        }
        return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
    }

    /// A device to soft-disable because its provider declared the token it was sent to dead, or
    /// a Live Activity token to end (`herald.dead_token`).
    struct DeadToken: PostgresComposite {
        var id: Int64
        var token: String
        var reason: String
        /// Only if the device registered the token before this (APNs' 410 timestamp).
        var since: Date?

        var postgresFields: [any PostgresEncodable] {
            [id, token, DispatchWorker.storable(reason), since?.timeIntervalSince1970]
        }
    }

    /// A delivery's outcome as `herald.record_sends` takes it (`herald.send_outcome`).
    struct SendOutcome: PostgresComposite {
        var id: Int64
        var result: DeliveryResult
        /// When nothing was answered: the claim's time.
        var now: Date

        var postgresFields: [any PostgresEncodable] {
            var givenBack = false
            if case .postponed = result.requeue { givenBack = true }
            return [
                id, result.state.rawValue, result.messageName.map(DispatchWorker.storable),
                result.uniqueID.map(DispatchWorker.storable), result.error.map(DispatchWorker.storable),
                (result.answeredAt ?? now).timeIntervalSince1970, result.requeue?.dueAt.timeIntervalSince1970,
                givenBack, result.dead,
            ]
        }
    }

    /// A configuration found failing, or (`problem` nil) working again (`herald.config_problem`).
    struct ConfigProblem: PostgresComposite {
        var key: ProblemKey
        var problem: String?

        var postgresFields: [any PostgresEncodable] {
            [key.app, key.scope.rawValue, problem.map(DispatchWorker.storable)]
        }
    }

    /// The tokens its provider declared dead: devices' push tokens, and (`activity`) Live
    /// Activity tokens APNs refused, which end alone: the device's own token may well be alive.
    /// Through FCM, a dead token is the device's registration token, as for any send.
    static func deadTokens(
        _ results: [Int64: DeliveryResult], _ deliveries: [Int64: OutgoingDelivery],
        providers: [String: any ProviderRoute.Type]
    ) -> (
        devices: [DeadToken], activity: [DeadToken]
    ) {
        var devices: [DeadToken] = []
        var activity: [DeadToken] = []
        for (id, result) in results {
            guard result.state == .tokenInvalid, let delivery = deliveries[id], let route = delivery.route else {
                continue
            }
            let provider = providers[route.provider]
            let reason = "\(provider?.displayName ?? route.provider): \(result.error ?? "token invalid")"
            if let live = delivery.liveActivity, route.provider == APNsRoute.name {
                if let row = live.tokenRowID, let token = live.token {
                    activity.append(DeadToken(id: row, token: token, reason: reason))
                }
            } else if let device = delivery.deviceRowID, let token = delivery.target?.deviceToken {
                devices.append(DeadToken(id: device, token: token, reason: reason, since: result.invalidSince))
            }
        }
        return (devices, activity)
    }

    /// Records the outcomes and releases the leases, in one statement (``SQL/record``).
    func record(
        _ results: [Int64: DeliveryResult], disabled: [DeadToken], endedActivityTokens: [DeadToken] = [],
        problems: [ProblemKey: String?], now: Date
    ) async throws {
        try await context.connection.query(
            SQL.record,
            [
                results.map { SendOutcome(id: $0.key, result: $0.value, now: now) }, context.workerID, now, disabled,
                endedActivityTokens, problems.map { ConfigProblem(key: $0.key, problem: $0.value) },
            ])
    }
}

/// The report-reference secret, read once from `herald.secrets` (SQL checks references with
/// the same secret, so it has no other source).
actor SecretCache {
    private var cached: DeliveryReference?

    func reference(_ context: WorkerContext) async throws -> DeliveryReference {
        if let cached { return cached }
        let rows = try await context.connection.query(DispatchWorker.SQL.secret)
        guard let row = rows.first else {
            throw ConfigurationProblem("herald.secrets has no report_hmac; run herald migrate")
        }
        let reference = DeliveryReference(secret: [UInt8](try row.decode(0, as: Data.self)))
        cached = reference
        return reference
    }
}

/// The setups of the apps a dispatch loop sends for, by app, with the version of the row they
/// were read from (its xmin, which every change to the row renews). A claim returns each
/// delivery's app version; only apps whose version is new are read again, in one statement.
final class AppSetups: Sendable {
    private let cache = Mutex<[String: (version: String, setup: AppSetup)]>([:])

    func setups(_ versions: [String: String], connection: PostgresConnection) async throws -> [String: AppSetup] {
        let stale = cache.withLock { cache in versions.filter { cache[$0.key]?.version != $0.value }.map(\.key) }
        if !stale.isEmpty {
            let rows = try await connection.query(DispatchWorker.SQL.appSetups, [stale])
            let read = try rows.map { row in
                (
                    version: try row.decode("app_version", as: String.self),
                    setup: AppSetup(
                        appID: try row.decode("app_id"), fcmProjectID: try row.decode("fcm_project_id"),
                        credentialsFile: try row.decode("credentials_file", as: String?.self),
                        vapidKeyFile: try row.decode("vapid_key_file", as: String?.self),
                        vapidSubject: try row.decode("vapid_subject", as: String?.self),
                        webPushHosts: try row.decode("web_push_hosts", as: [String]?.self) ?? [],
                        webPushPrivateAddresses: try row.decode("web_push_private_addresses"),
                        apnsEnvironment: try row.decode("apns_environment", as: String?.self) ?? "production",
                        apnsBundleID: try row.decode("apns_bundle_id", as: String?.self),
                        apnsTeamID: try row.decode("apns_team_id", as: String?.self),
                        apnsKeyID: try row.decode("apns_key_id", as: String?.self),
                        apnsKeyFile: try row.decode("apns_key_file", as: String?.self),
                        apnsCertificateFile: try row.decode("apns_certificate_file", as: String?.self),
                        providerSettings: try Self.providerSettings(row.decode("provider_settings")))
                )
            }
            cache.withLock { cache in for entry in read { cache[entry.setup.appID] = entry } }
        }
        return cache.withLock { cache in versions.keys.reduce(into: [:]) { $0[$1] = cache[$1]?.setup } }
    }

    /// `{"provider": {…its row…}}`, split by provider.
    static func providerSettings(_ json: String) throws -> [String: Data] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        return try object.mapValues { try JSONSerialization.data(withJSONObject: $0) }
    }
}
