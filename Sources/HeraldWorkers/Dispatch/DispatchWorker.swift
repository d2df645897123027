import Foundation
import HeraldFCM
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

/// Sends deliveries through FCM and records what happened to each.
///
/// Per batch: one query loads the deliveries; expired ones end `expired` and those whose
/// device was disabled since ingest end `cancelled`, unsent. The rest are built into
/// per-platform messages and sent concurrently, app by app (each app has its own credentials
/// and its project's rate limit). Outcomes are recorded in one transaction: deliveries,
/// devices whose token FCM declared dead, and apps whose configuration failed.
///
/// A delivery is `sent` only after FCM answered 200. A crash between the send and the record
/// leaves the job leased; it is rescued and sent again (at-least-once): the duplicate window
/// is the batch in flight.
public struct DispatchWorker: JobHandler {
    public let kind = "dispatch"
    let context: WorkerContext
    let secret = SecretCache()

    /// While an app's configuration fails, its deliveries wait (without spending attempts) and
    /// one probe goes out this often, so a broken credential costs a probe a minute, not a storm.
    public static let configurationRetry: Duration = .seconds(60)

    public init(context: WorkerContext) { self.context = context }

    /// The outcome to record for one delivery.
    struct DeliveryResult {
        var state: String
        var messageName: String? = nil
        var error: String? = nil
        var attempted = false
        var job: JobOutcome = .completed
        /// When FCM answered (its batch's last answer): the delivery's `sent_at`. Nil when
        /// nothing was sent; the batch's start time is recorded then.
        var answeredAt: Date? = nil
    }

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        let now = context.clock.now()
        let ids = jobs.compactMap(\.ref)
        let deliveries: [Int64: OutgoingDelivery]
        let builder: PayloadBuilder
        do {
            builder = PayloadBuilder(reference: try await secret.reference(context), reportBaseURL: context.publicURL)
            deliveries = try await load(ids)
        } catch {
            context.logger.error("cannot load deliveries; the batch will be retried", metadata: ["error": "\(error)"])
            return Dictionary(
                uniqueKeysWithValues: jobs.map { ($0.id, .retry(error: "loading deliveries failed: \(error)")) })
        }

        var results: [Int64: DeliveryResult] = [:]
        var sendable: [String: [OutgoingDelivery]] = [:]
        for job in jobs {
            guard let id = job.ref, let delivery = deliveries[id] else { continue }
            if delivery.state != "queued" {
                continue  // already final: a repeated job changes nothing
            } else if delivery.expiresAt <= now {
                results[id] = DeliveryResult(
                    state: "expired", error: "expired at \(delivery.expiresAt) before it was sent")
            } else if let reason = delivery.deviceDisabledReason {
                results[id] = DeliveryResult(state: "cancelled", error: "device disabled since ingest: \(reason)")
            } else if delivery.payloadKind != .topic && delivery.pushToken == nil {
                results[id] = DeliveryResult(state: "cancelled", error: "the device has no push token")
            } else {
                sendable[delivery.appID, default: []].append(delivery)
            }
        }

        // An app whose configuration is failing gets one probe a minute, not a send per message.
        for (app, batch) in sendable {
            guard let failedAt = batch[0].appConfigErrorAt else { continue }
            let waited = now.timeIntervalSince(failedAt)
            let retry = Self.configurationRetry.components.seconds
            if waited < Double(retry) {
                let wait = Duration.seconds(max(1, Double(retry) - waited))
                for delivery in batch { results[delivery.deliveryID] = Self.postponed(app: app, by: wait) }
                sendable[app] = nil
            } else {
                for delivery in batch.dropFirst() {
                    results[delivery.deliveryID] = Self.postponed(app: app, by: .seconds(5))
                }
                sendable[app] = [batch[0]]
            }
        }

        var appErrors: [String: String?] = [:]
        await withTaskGroup(of: ([(Int64, DeliveryResult)], String, String?).self) { group in
            for (app, batch) in sendable {
                group.addTask { await send(batch, app: app, builder: builder, now: now) }
            }
            for await (sent, app, problem) in group {
                for (id, result) in sent { results[id] = result }
                appErrors[app] = problem
            }
        }

        var outcomes: [Int64: JobOutcome] = [:]
        var sendsByOutcome: [String: Int] = [:]
        for job in jobs {
            guard let id = job.ref, var result = results[id] else {
                outcomes[job.id] = .completed
                continue
            }
            if case .retry(let error, _) = result.job, job.isLastAttempt {
                result.state = "failed"
                result.error = "gave up after \(job.attempts) attempts: \(error)"
                result.job = .completed
                results[id] = result
            }
            outcomes[job.id] = result.job
            sendsByOutcome[Self.metricOutcome(result), default: 0] += 1
        }
        // One counter update per outcome and batch, not per delivery.
        for (outcome, count) in sendsByOutcome {
            Counter(label: "herald_sends_total", dimensions: [("outcome", outcome)]).increment(by: count)
        }
        do {
            try await record(results, deliveries: deliveries, appErrors: appErrors, now: now)
        } catch {
            context.logger.error("recording sends failed; the batch will be retried", metadata: ["error": "\(error)"])
            return Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, .retry(error: "recording failed: \(error)")) })
        }
        return outcomes
    }

    /// Sends one app's deliveries; returns their results and the app's configuration problem (nil if none).
    func send(_ batch: [OutgoingDelivery], app: String, builder: PayloadBuilder, now: Date) async -> (
        [(Int64, DeliveryResult)], String, String?
    ) {
        guard let senders = context.senders else {
            return (
                batch.map { ($0.deliveryID, Self.configurationResult("no FCM senders configured")) }, app,
                "no FCM senders configured"
            )
        }
        let first = batch[0]
        switch await senders.sender(app: app, project: first.fcmProjectID, credentialsFile: first.credentialsFile) {
        case .failure(let problem):
            if await senders.shouldLog(app: app, problem: problem.description) {
                context.logger.error("cannot send for app", metadata: ["app": "\(app)", "error": "\(problem)"])
            }
            return (
                batch.map { ($0.deliveryID, Self.configurationResult(problem.description)) }, app, problem.description
            )
        case .success(let sender):
            var results: [(Int64, DeliveryResult)] = []
            var problem: String?
            for dryRun in [false, true] {
                let part = batch.filter { $0.dryRun == dryRun }
                if part.isEmpty { continue }
                await sender.limiter.acquire(part.count)
                let started = ContinuousClock.now
                let outcomes = await sender.client.send(
                    part.map { builder.message(for: $0, now: now) }, validateOnly: dryRun)
                Metrics.Timer(label: "herald_send_batch_duration_seconds").record(
                    duration: ContinuousClock.now - started)
                let answeredAt = context.clock.now()
                for (delivery, outcome) in zip(part, outcomes) {
                    var result = Self.result(outcome, dryRun: dryRun)
                    result.answeredAt = answeredAt
                    if case .configurationError(let reason) = outcome { problem = reason }
                    results.append((delivery.deliveryID, result))
                }
            }
            if let problem, await senders.shouldLog(app: app, problem: problem) {
                context.logger.error(
                    "FCM refused the app's configuration", metadata: ["app": "\(app)", "error": "\(problem)"])
            }
            return (results, app, problem)
        }
    }

    /// The delivery's new state, or for one still queued, why: `retry` or `postponed`.
    static func metricOutcome(_ result: DeliveryResult) -> String {
        switch result.job {
        case .retry: return "retry"
        case .postpone: return "postponed"
        case .completed, .dead: return result.state
        }
    }

    static func postponed(app: String, by wait: Duration) -> DeliveryResult {
        DeliveryResult(
            state: "queued",
            job: .postpone(
                by: wait, reason: "waiting: the configuration of app \(app) is failing (see herald.app_problems)"))
    }

    static func configurationResult(_ reason: String) -> DeliveryResult {
        DeliveryResult(
            state: "queued", error: "configuration: \(reason)",
            job: .retry(error: reason, notBefore: configurationRetry))
    }

    /// What an FCM outcome means for the delivery and its job.
    static func result(_ outcome: FCMOutcome, dryRun: Bool) -> DeliveryResult {
        switch outcome {
        case .sent(let name):
            return DeliveryResult(state: dryRun ? "validated" : "sent", messageName: name, attempted: true)
        case .tokenInvalid(let reason):
            return DeliveryResult(state: "token_invalid", error: reason, attempted: true)
        case .retry(let after, let reason):
            return DeliveryResult(
                state: "queued", error: reason, attempted: true, job: .retry(error: reason, notBefore: after))
        case .configurationError(let reason):
            var result = configurationResult(reason)
            result.attempted = true
            return result
        case .permanentFailure(let reason):
            return DeliveryResult(state: "failed", error: reason, attempted: true)
        }
    }

    func load(_ ids: [Int64]) async throws -> [Int64: OutgoingDelivery] {
        guard !ids.isEmpty else { return [:] }
        var deliveries: [Int64: OutgoingDelivery] = [:]
        for row in try await context.connection.query(SQL.load, [ids]) {
            let delivery = OutgoingDelivery(
                deliveryID: try row.decode(0), notificationID: try row.decode(1), state: try row.decode(2),
                payloadKind: OutgoingDelivery.PayloadKind(rawValue: try row.decode(3)) ?? .androidData,
                deviceRowID: try row.decode(4, as: Int64?.self), pushToken: try row.decode(5, as: String?.self),
                deviceDisabledReason: try row.decode(6, as: String?.self), appID: try row.decode(7),
                fcmProjectID: try row.decode(8), credentialsFile: try row.decode(9, as: String?.self),
                topic: try row.decode(10, as: String?.self), title: try row.decode(11, as: String?.self),
                body: try row.decode(12, as: String?.self),
                data: Self.stringPairs(try row.decode(13, as: String?.self)),
                imageURL: try row.decode(14, as: String?.self), sound: try row.decode(15, as: String?.self),
                badge: try row.decode(16, as: Int?.self), androidChannelID: try row.decode(17, as: String?.self),
                iosCategory: try row.decode(18, as: String?.self), iosThreadID: try row.decode(19, as: String?.self),
                deepLink: try row.decode(20, as: String?.self),
                priority: try row.decode(21, as: String?.self) ?? "high",
                expiresAt: try row.decode(22, as: Date?.self) ?? .distantFuture,
                collapseKey: try row.decode(23, as: String?.self), silent: try row.decode(24),
                dryRun: try row.decode(25), appConfigErrorAt: try row.decode(26, as: Date?.self))
            deliveries[delivery.deliveryID] = delivery
        }
        return deliveries
    }

    /// A JSON object of strings, in its keys' order.
    static func stringPairs(_ json: String?) -> [(String, String)] {
        guard let json, let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return []
        }
        return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
    }

    func record(
        _ results: [Int64: DeliveryResult], deliveries: [Int64: OutgoingDelivery], appErrors: [String: String?],
        now: Date
    ) async throws {
        var ids: [Int64] = []
        var states: [String] = []
        var names: [String?] = []
        var errors: [String?] = []
        var attempted: [Bool] = []
        var times: [Double] = []
        var disabled: (ids: [Int64], tokens: [String], reasons: [String]) = ([], [], [])
        for (id, result) in results {
            ids.append(id)
            states.append(result.state)
            names.append(result.messageName)
            errors.append(result.error)
            attempted.append(result.attempted)
            times.append((result.answeredAt ?? now).timeIntervalSince1970)
            if result.state == "token_invalid", let delivery = deliveries[id], let device = delivery.deviceRowID,
                let token = delivery.pushToken
            {
                disabled.ids.append(device)
                disabled.tokens.append(token)
                disabled.reasons.append("FCM: \(result.error ?? "token invalid")")
            }
        }
        let apps = Array(appErrors.keys)
        let appProblems = apps.map { appErrors[$0] ?? nil }
        try await context.connection.transaction { [ids, states, names, errors, attempted, times, disabled] session in
            if !ids.isEmpty { try session.query(SQL.record, [ids, states, names, errors, attempted, times]) }
            if !disabled.ids.isEmpty {
                try session.query(SQL.disableDevices, [disabled.ids, disabled.tokens, disabled.reasons, now])
            }
            if !apps.isEmpty { try session.query(SQL.appStatus, [apps, appProblems, now]) }
        }
        for index in disabled.ids.indices {
            context.logger.notice(
                "disabled a device whose push token FCM rejected",
                metadata: [
                    "device": "\(disabled.ids[index])", "token": "\(tokenHint(disabled.tokens[index]))",
                    "reason": "\(disabled.reasons[index])",
                ])
        }
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
