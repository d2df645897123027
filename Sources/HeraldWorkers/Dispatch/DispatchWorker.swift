import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

/// Sends deliveries through FCM and records what happened to each. The deliveries are the
/// queue: no job rows (see `migrations/010_tables_are_their_own_queues.sql`).
///
/// Per batch: one statement leases the deliveries due and reads what is needed to send them;
/// expired ones end `expired` and those whose device was disabled since ingest end
/// `cancelled`, unsent. The rest are built into per-platform messages and sent concurrently,
/// app by app (each app has its own credentials and its project's rate limit). One statement
/// records the outcomes and releases the leases: deliveries, devices whose token FCM declared
/// dead, and apps whose configuration failed. If the database is away then, the outcomes are
/// kept and recorded when it is back, within the lease.
///
/// A delivery is `sent` only after FCM answered 200. A crash between the send and the record
/// leaves the delivery leased; when the lease ends it is due again and sent again
/// (at-least-once): the duplicate window is the batches in flight.
public struct DispatchWorker: BatchWorker {
    public let kind = WorkerKind.dispatch.rawValue
    let context: WorkerContext
    let secret = SecretCache()
    /// Each route's deliveries in flight (shared by the daemon's dispatch loops through its
    /// senders), and the sends this loop has started.
    var windows: RouteWindows { context.senders?.routeWindows ?? ownWindows }
    private let ownWindows = RouteWindows()
    let inFlight = InFlightTasks()
    private let claimDuration = Metrics.Timer(
        label: "herald_claim_duration_seconds", dimensions: [("kind", WorkerKind.dispatch.rawValue)])
    private let sendDuration = Metrics.Timer(label: "herald_send_batch_duration_seconds")

    public init(context: WorkerContext) { self.context = context }

    /// The outcome to record for one delivery.
    struct DeliveryResult {
        /// What a delivery that stays queued does next.
        enum Retry {
            /// An attempt that failed: due again after the backoff, or `notBefore` if later.
            case backoff(notBefore: Duration?)
            /// Not attempted: due again after this, and the claim is given back.
            case postpone(Duration)
        }

        var state: DeliveryState
        var messageName: String? = nil
        /// APNs' `apns-unique-id`, when it gives one.
        var uniqueID: String? = nil
        var error: String? = nil
        /// For a dead token: when the provider says it died (APNs' 410 timestamp).
        var invalidSince: Date? = nil
        var retry: Retry? = nil
        /// Ran out of attempts: `failed`, and listed as dead until redriven.
        var dead = false
        /// When a delivery that stays queued is due again.
        var dueAgain: Date? = nil
        /// When FCM answered (its batch's last answer): the delivery's `sent_at`. Nil when
        /// nothing was sent; the batch's start time is recorded then.
        var answeredAt: Date? = nil
    }

    public func runBatch(limit: Int, isStopping: @escaping @Sendable () -> Bool) async throws -> Int {
        let builder = PayloadBuilder(reference: try await secret.reference(context), reportBaseURL: context.publicURL)
        let claimedAt = ContinuousClock.now
        let now = context.clock.now()
        let (claimed, unreadable) = try await claim(limit: limit, now: now)
        claimDuration.record(duration: ContinuousClock.now - claimedAt)
        guard !claimed.isEmpty || !unreadable.isEmpty else { return 0 }

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
            for delivery in batch.dropFirst(admission.count) {
                settled[delivery.deliveryID] = Self.saturated(key, wait: admission.wait)
            }
            if admission.count < batch.count {
                windows.noteSaturated(key, postponed: batch.count - admission.count, logger: context.logger)
            }
            guard admission.count > 0 else { continue }
            let part = Array(batch.prefix(admission.count))
            if admission.awaited { awaited += 1 }
            inFlight.start { [self] in
                let ((results, problems), heldUntil) = await keepingLeases(of: part, claimedAt: claimedAt) {
                    await send(route: key, part, builder: builder, now: now)
                }
                if !collector.take(results, problems, awaited: admission.awaited) {
                    // Late: recorded on its own, at its own time. It reports only the problems
                    // it found: its all-clear could undo a problem another route (of the same
                    // scope) found meanwhile; probes and the retry worker clear them.
                    await recordOutcomes(
                        results, of: part, problems: problems.filter { $0.value != nil }, leaseEnds: heldUntil,
                        now: context.clock.now())
                }
                windows.release(key, ticket: admission.ticket)
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

    /// Waits for the routes' sends still in flight to be recorded (at shutdown, or at the end
    /// of a test's drain).
    public func finish() async { await inFlight.waitAll() }

    /// Runs one route's send while keeping its deliveries leased: a send may take longer than
    /// the lease (a route answering slowly, its requests queued behind a full window, a token
    /// fetch), and a lease that ran out mid-send would let another worker claim and send them
    /// again. At each half-life of the lease, one statement extends it for the send's
    /// deliveries this worker still holds. Returns the send's result and when the lease held
    /// now ends (recording stops retrying then, see ``recordOutcomes``).
    func keepingLeases<Result: Sendable>(
        of part: [OutgoingDelivery], claimedAt: ContinuousClock.Instant, _ send: () async -> Result
    ) async -> (Result, ContinuousClock.Instant) {
        let lease = context.lease
        let renewals = Task { [context] () -> ContinuousClock.Instant in
            var heldUntil = claimedAt.advanced(by: lease)
            let ids = part.map(\.deliveryID)
            while true {
                do {
                    try await Task.sleep(until: heldUntil - lease / 2, clock: .continuous)
                } catch {
                    return heldUntil  // the send is done
                }
                let asked = ContinuousClock.now
                do {
                    try await context.connection.query(
                        SQL.extendLeases, [ids, context.workerID, context.clock.now(), lease.seconds])
                    heldUntil = asked.advanced(by: lease)
                } catch {
                    context.logger.warning(
                        "could not extend the leases of a slow route's deliveries; trying again",
                        metadata: ["error": "\(error)", "deliveries": "\(ids.count)"])
                    try? await Task.sleep(for: .seconds(1))
                    if Task.isCancelled { return heldUntil }
                }
            }
        }
        let result = await send()
        renewals.cancel()
        return (result, await renewals.value)
    }

    /// Schedules what stays queued, counts the outcomes and records them with their leases
    /// released (``record(_:disabled:problems:now:)``), keeping them while the database is away
    /// until the lease ends.
    func recordOutcomes(
        _ results: [Int64: DeliveryResult], of batch: [OutgoingDelivery], problems: [ProblemKey: String?],
        leaseEnds: ContinuousClock.Instant, now: Date
    ) async {
        let deliveries = Dictionary(uniqueKeysWithValues: batch.map { ($0.deliveryID, $0) })
        var results = results
        // Every delivery left queued goes to the retry policy: when it is due again, or dead.
        for (id, result) in results where result.retry != nil {
            results[id] = RetryWorker.schedule(
                result, attempts: deliveries[id]?.attempts ?? 1, now: now, backoff: context.backoff)
        }
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
        let disabled = Self.deadTokens(results, deliveries)
        let recorded = await recordWithinLease(
            until: leaseEnds, logger: context.logger, items: results.count
        ) {
            try await record(results, disabled: disabled, problems: problems, now: now)
        }
        if recorded {
            for device in disabled {
                context.logger.notice(
                    "disabled a device whose push token its provider rejected",
                    metadata: [
                        "device": "\(device.id)", "token": "\(tokenHint(device.token))", "reason": "\(device.reason)",
                    ])
            }
        }
    }

    /// Decides every claimed delivery that is not sent: those that cannot or need not be sent
    /// end here, and a route whose configuration is failing sends one probe and postpones the
    /// rest. Returns their results, and the deliveries to send by route (an app's FCM Android
    /// and topic sends, its iOS sends through FCM or straight to APNs, its browsers).
    func decide(_ claimed: [OutgoingDelivery], now: Date) -> (
        settled: [Int64: DeliveryResult], routes: [RouteKey: [OutgoingDelivery]]
    ) {
        var results: [Int64: DeliveryResult] = [:]
        var sendable: [RouteKey: [OutgoingDelivery]] = [:]
        var rescued: [String: Int] = [:]
        for delivery in claimed {
            let id = delivery.deliveryID
            if let worker = delivery.abandonedBy { rescued[worker, default: 0] += 1 }
            if let givenUp = RetryWorker.abandoned(after: delivery.attempts, by: delivery.abandonedBy) {
                results[id] = givenUp
            } else if delivery.expiresAt <= now {
                results[id] = DeliveryResult(
                    state: .expired, error: "expired at \(delivery.expiresAt) before it was sent")
            } else if let reason = delivery.deviceDisabledReason {
                results[id] = DeliveryResult(state: .cancelled, error: "device disabled since ingest: \(reason)")
            } else if delivery.payloadKind != .topic && delivery.pushToken == nil {
                results[id] = DeliveryResult(state: .cancelled, error: "the device has no push token")
            } else {
                let key = RouteKey(
                    app: delivery.appID, route: delivery.route,
                    origin: delivery.route == .web ? delivery.pushToken.map { String(HTTPRequest.origin(of: $0)) } : nil
                )
                sendable[key, default: []].append(delivery)
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
            if let wait = RetryWorker.configurationWait(failedAt: failedAt, now: now) {
                for delivery in batch { results[delivery.deliveryID] = Self.postponed(key, by: wait) }
                sendable[key] = nil
            } else {
                for delivery in batch.dropFirst() {
                    results[delivery.deliveryID] = Self.postponed(key, by: .seconds(5))
                }
                sendable[key] = [batch[0]]
            }
        }
        return (results, sendable)
    }

    /// Sends one route's deliveries through its provider; returns a result per delivery and
    /// the configuration problems its answers show: each of its scopes found failing, or (nil)
    /// working again when none was found.
    func send(route key: RouteKey, _ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date) async -> (
        [Int64: DeliveryResult], [ProblemKey: String?]
    ) {
        let (sent, found) =
            switch key.route {
            case .fcm, .fcmAPNs: await sendFCM(batch, app: key.app, builder: builder, now: now)
            case .web: await sendWebPush(batch, app: key.app, builder: builder, now: now)
            case .apns: await sendAPNs(batch, app: key.app, builder: builder, now: now)
            }
        var problems: [ProblemKey: String?] = [:]
        // A route that found a problem tells nothing of its other scopes; one that found none
        // clears those of every scope it depends on.
        for (scope, problem) in found { problems[ProblemKey(app: key.app, scope: scope)] = .some(problem) }
        if found.isEmpty {
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
        return (Dictionary(sent, uniquingKeysWith: { first, _ in first }), problems)
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

    /// One batch's send to a provider, timed (`herald_send_batch_duration_seconds`).
    func timed<Outcomes>(_ send: () async -> Outcomes) async -> Outcomes {
        let started = ContinuousClock.now
        defer { sendDuration.record(duration: ContinuousClock.now - started) }
        return await send()
    }

    /// Results for a batch that could not be sent because its sender could not be made.
    func unsendable(_ batch: [OutgoingDelivery], _ problem: String, scope: ConfigurationScope) -> (
        [(Int64, DeliveryResult)], [ConfigurationScope: String]
    ) {
        (batch.map { ($0.deliveryID, Self.configurationResult(problem)) }, [scope: problem])
    }

    /// The results of sends the provider answered, with the configuration problems they show.
    func results(
        _ part: [OutgoingDelivery], _ outcomes: [PushOutcome], dryRun: Bool, answeredAt: Date,
        problems: inout [ConfigurationScope: String]
    ) -> [(Int64, DeliveryResult)] {
        zip(part, outcomes).map { delivery, outcome in
            var result = Self.result(outcome, dryRun: dryRun)
            result.answeredAt = answeredAt
            if case .configurationError(let reason, let scope) = outcome { problems[scope] = reason }
            return (delivery.deliveryID, result)
        }
    }

    /// The delivery's new state, or for one still queued, why: `retry` or `postponed`.
    static func metricOutcome(_ result: DeliveryResult) -> String {
        switch result.retry {
        case .backoff: return "retry"
        case .postpone: return "postponed"
        case nil: return result.state.rawValue
        }
    }

    /// The `outcome` label of `herald_jobs_finished_total`, as for job rows.
    static func jobOutcome(_ result: DeliveryResult) -> String {
        switch result.retry {
        case .backoff: return "retry"
        case .postpone: return "postponed"
        case nil: return result.dead ? "dead" : "completed"
        }
    }

    static func postponed(_ key: RouteKey, by wait: Duration) -> DeliveryResult {
        DeliveryResult(
            state: .queued,
            error: "waiting: the configuration of app \(key.app) for \(key.route.description) is failing"
                + " (see herald.app_problems)",
            retry: .postpone(wait))
    }

    /// What a route's full window could not take waits, without an attempt spent and without a
    /// line in its error history (it may wait many times while the route is slow).
    static func saturated(_ key: RouteKey, wait: Duration) -> DeliveryResult {
        DeliveryResult(state: .queued, retry: .postpone(wait))
    }

    static func configurationResult(_ reason: String) -> DeliveryResult {
        DeliveryResult(
            state: .queued, error: "configuration: \(reason)",
            retry: .backoff(notBefore: RetryWorker.configurationRetry))
    }

    /// What a provider's outcome means for the delivery.
    static func result(_ outcome: PushOutcome, dryRun: Bool) -> DeliveryResult {
        switch outcome {
        case .sent(let name, let uniqueID):
            return DeliveryResult(state: dryRun ? .validated : .sent, messageName: name, uniqueID: uniqueID)
        case .tokenInvalid(let reason, let since):
            return DeliveryResult(state: .tokenInvalid, error: reason, invalidSince: since)
        case .retry(let after, let reason):
            return DeliveryResult(state: .queued, error: reason, retry: .backoff(notBefore: after))
        case .configurationError(let reason, _):
            return configurationResult(reason)
        case .permanentFailure(let reason):
            return DeliveryResult(state: .failed, error: reason)
        }
    }

    /// Text a provider wrote (a reason, a message id), as PostgreSQL text can hold it: a NUL
    /// becomes U+FFFD. Whatever a server answers, its record must not fail, or the batch's
    /// sends would be repeated when their lease ends.
    static func storable(_ text: String) -> String {
        text.utf8.contains(0) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    /// Leases up to `limit` due deliveries and reads them (``SQL/claim``). A row that cannot be
    /// read (whatever it holds: a value out of Swift's range, a column out of step) is not sent
    /// and ends `failed` with the reason; the rest of the batch goes on.
    func claim(limit: Int, now: Date) async throws -> (
        readable: [OutgoingDelivery], unreadable: [Int64: DeliveryResult]
    ) {
        let rows = try await context.connection.query(
            SQL.claim, [now, limit, context.workerID, context.lease.seconds])
        var readable: [OutgoingDelivery] = []
        var unreadable: [Int64: DeliveryResult] = [:]
        readable.reserveCapacity(rows.count)
        for row in rows {
            // The primary key: a bigint, never NULL, so always readable.
            let id: Int64 = try row.decode("delivery_id")
            do {
                readable.append(try Self.delivery(from: row))
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
        return (readable, unreadable)
    }

    static func delivery(from row: PostgresRow) throws -> OutgoingDelivery {
        return OutgoingDelivery(
            deliveryID: try row.decode("delivery_id"), notificationID: try row.decode("notification_id"),
            attempts: try row.decode("attempts"), abandonedBy: try row.decode("abandoned_by", as: String?.self),
            payloadKind: OutgoingDelivery.PayloadKind(rawValue: try row.decode("payload_kind")) ?? .androidData,
            deviceRowID: try row.decode("device_id", as: Int64?.self),
            pushToken: try row.decode("push_token", as: String?.self),
            tokenKind: OutgoingDelivery.TokenKind(rawValue: try row.decode("token_kind", as: String?.self) ?? "")
                ?? .registrationToken,
            deviceDisabledReason: try row.decode("device_disabled_reason", as: String?.self),
            appID: try row.decode("app_id"), fcmProjectID: try row.decode("fcm_project_id"),
            credentialsFile: try row.decode("credentials_file", as: String?.self),
            topic: try row.decode("topic", as: String?.self), title: try row.decode("title", as: String?.self),
            body: try row.decode("body", as: String?.self),
            data: Self.stringPairs(try row.decode("data", as: String?.self)),
            imageURL: try row.decode("image_url", as: String?.self),
            sound: try row.decode("sound", as: String?.self),
            badge: try row.decode("badge", as: Int?.self),
            androidChannelID: try row.decode("android_channel_id", as: String?.self),
            iosCategory: try row.decode("ios_category", as: String?.self),
            iosThreadID: try row.decode("ios_thread_id", as: String?.self),
            deepLink: try row.decode("deep_link", as: String?.self),
            // Ingest sets both before any delivery exists; a NULL here is a bug to hear about.
            priority: try row.decode("priority"), expiresAt: try row.decode("expires_at"),
            collapseKey: try row.decode("collapse_key", as: String?.self), silent: try row.decode("silent"),
            dryRun: try row.decode("dry_run"),
            webP256dh: try row.decode("web_p256dh", as: Data?.self).map { [UInt8]($0) },
            webAuth: try row.decode("web_auth", as: Data?.self).map { [UInt8]($0) },
            vapidKeyFile: try row.decode("vapid_key_file", as: String?.self),
            vapidSubject: try row.decode("vapid_subject", as: String?.self),
            apnsEnvironment: try row.decode("apns_environment"),
            apnsBundleID: try row.decode("apns_bundle_id", as: String?.self),
            apnsTeamID: try row.decode("apns_team_id", as: String?.self),
            apnsKeyID: try row.decode("apns_key_id", as: String?.self),
            apnsKeyFile: try row.decode("apns_key_file", as: String?.self),
            apnsCertificateFile: try row.decode("apns_certificate_file", as: String?.self),
            webPushHosts: try row.decode("web_push_hosts", as: [String]?.self) ?? [],
            webPushPrivateAddresses: try row.decode("web_push_private_addresses"),
            configurationFailedAt: try row.decode("config_error_at", as: Date?.self))
    }

    /// A JSON object of strings, in its keys' order.
    static func stringPairs(_ json: String?) -> [(String, String)] {
        guard let json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return []
        }
        return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
    }

    /// A device to soft-disable because its provider declared the token it was sent to dead.
    struct DeadToken {
        var id: Int64
        var token: String
        var reason: String
        /// Only if the device registered the token before this (APNs' 410 timestamp).
        var since: Date?
    }

    static func deadTokens(_ results: [Int64: DeliveryResult], _ deliveries: [Int64: OutgoingDelivery]) -> [DeadToken] {
        results.compactMap { id, result in
            guard result.state == .tokenInvalid, let delivery = deliveries[id], let device = delivery.deviceRowID,
                let token = delivery.pushToken
            else { return nil }
            return DeadToken(
                id: device, token: token, reason: "\(delivery.route.provider): \(result.error ?? "token invalid")",
                since: result.invalidSince)
        }
    }

    /// Records the outcomes and releases the leases, in one statement (``SQL/record``).
    func record(
        _ results: [Int64: DeliveryResult], disabled: [DeadToken], problems: [ProblemKey: String?], now: Date
    ) async throws {
        var ids: [Int64] = []
        var states: [String] = []
        var names: [String?] = []
        var uniqueIDs: [String?] = []
        var errors: [String?] = []
        var answered: [Double] = []
        var nextRun: [Double?] = []
        var givenBack: [Bool] = []
        var dead: [Bool] = []
        for (id, result) in results {
            ids.append(id)
            states.append(result.state.rawValue)
            names.append(result.messageName.map(Self.storable))
            uniqueIDs.append(result.uniqueID.map(Self.storable))
            errors.append(result.error.map(Self.storable))
            let answeredAt = result.answeredAt ?? now
            answered.append(answeredAt.timeIntervalSince1970)
            nextRun.append(result.dueAgain?.timeIntervalSince1970)
            if case .postpone = result.retry { givenBack.append(true) } else { givenBack.append(false) }
            dead.append(result.dead)
        }
        let scopes = Array(problems.keys)
        try await context.connection.query(
            SQL.record,
            [
                ids, states, names, errors, answered, nextRun, givenBack, dead, context.workerID,
                disabled.map(\.id), disabled.map(\.token), disabled.map { Self.storable($0.reason) }, now,
                scopes.map(\.app), scopes.map(\.scope.rawValue),
                scopes.map { (problems[$0] ?? nil).map(Self.storable) },
                uniqueIDs, disabled.map { $0.since?.timeIntervalSince1970 },
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
