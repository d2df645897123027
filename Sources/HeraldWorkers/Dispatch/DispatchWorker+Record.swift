import Foundation
import HeraldCore
import HeraldPostgres
import HeraldQueue
import Logging
import Metrics

extension DispatchWorker {
    /// Counts the outcomes and records them with their leases released
    /// (``record(_:dead:problems:at:)``), keeping them while the database is away until the
    /// lease ends. When the daemon gathers records, a small batch's that follows another
    /// closely is held a moment, to be recorded with the next ones (``RecordGatherer``).
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
        let outcomes = RecordGatherer.Batch(
            outcomes: results.map { SendOutcome(id: $0.key, result: $0.value, now: now) },
            dead: Self.deadTokens(results, deliveries, providers: providers), problems: problems,
            leaseEnds: leaseEnds, at: now)
        guard let gatherer = recordGatherer else { return await write(outcomes) }
        switch gatherer.hold(outcomes) {
        case .recordNow:
            await writeHeld()
        case .first(let until):
            inFlight.start { [self] in
                await gatherer.windowEnds(at: until)
                await writeHeld()
            }
        case .held:
            break
        }
    }

    /// Records the outcomes held (``RecordGatherer``), if any.
    func writeHeld() async {
        if let held = recordGatherer?.take() { await write(held) }
    }

    /// Records a batch's outcomes, retrying while the database is away until its lease ends,
    /// and logs the devices it disabled and the tokens it ended.
    private func write(_ batch: RecordGatherer.Batch) async {
        let recording = context.monotonicClock.now
        var ended: [Ended] = []
        _ = await recordWithinLease(
            until: batch.leaseEnds, clock: context.monotonicClock, logger: context.logger, items: batch.outcomes.count
        ) {
            let held = Set(context.heldApps.held(kind: kind, at: context.clock.now()))
            guard held.isEmpty else { return ended = try await recordEachApp(batch, held: held) }
            do {
                ended = try await record(batch.outcomes, dead: batch.dead, problems: batch.problems, at: batch.at)
            } catch let error as PostgresError where error.isLockTimeout {
                context.logger.warning(
                    "recording outcomes met a locked row; recording each app's apart", metadata: ["error": "\(error)"])
                ended = try await recordEachApp(batch, held: [])
            }
        }
        recordTimer.finished(
            took: context.monotonicClock.now - recording, rows: batch.outcomes.count, logger: context.logger)
        for token in ended {
            let message: Logger.Message =
                switch token.kind {
                case "device": "disabled a device whose push token its provider rejected"
                case "push_type_token": "disabled a device's widget, VoIP, location or Push to Talk token APNs rejected"
                default: "ended a Live Activity token its provider rejected"
                }
            context.logger.notice(
                message,
                metadata: [token.kind: "\(token.id)", "token": "\(token.hint)", "reason": "\(token.reason)"])
        }
    }

    /// Records a batch whose record met a delivery another session holds locked (a producer's
    /// fetch of it, in a transaction left open), or that holds outcomes of an app that met one
    /// lately (`held`): the dead tokens and problems (which never wait for such a lock:
    /// `herald.record_sends` leaves a locked device or token), then each app's outcomes apart. An
    /// app whose outcomes meet the lock is left for a while (HeldApps), and its outcomes, and a
    /// held app's, are recorded in the background, tried again until their lease ends, so that
    /// this loop and every other app go on; what is still not recorded then is claimed again.
    private func recordEachApp(_ batch: RecordGatherer.Batch, held: Set<String>) async throws -> [Ended] {
        var ended =
            batch.dead.isEmpty && batch.problems.isEmpty
            ? [] : try await record([], dead: batch.dead, problems: batch.problems, at: batch.at)
        var apps: [String] = []
        var ids: [String: Set<Int64>] = [:]
        for row in try await context.connection.query(SQL.apps, [batch.outcomes.map(\.id)]) {
            let app = try row.decode(1, as: String.self)
            if ids[app] == nil { apps.append(app) }
            ids[app, default: []].insert(try row.decode(0, as: Int64.self))
        }
        for app in apps {
            let outcomes = batch.outcomes.filter { ids[app]?.contains($0.id) == true }
            if !held.contains(app) {
                do {
                    ended += try await record(outcomes, problems: [:], at: batch.at)
                    context.heldApps.release(app, kind: kind)
                    continue
                } catch let error as PostgresError where error.isLockTimeout {
                    let wait = context.heldApps.leave(app, kind: kind, now: context.clock.now())
                    StatementBounds.leftLocked(
                        "app \(app)'s outcomes", kind: kind, until: "in the background, held \(wait)",
                        logger: context.logger)
                }
            }
            inFlight.start { [self] in
                _ = await recordWithinLease(
                    until: batch.leaseEnds, clock: context.monotonicClock, logger: context.logger, items: outcomes.count
                ) {
                    try await record(outcomes, problems: [:], at: batch.at)
                }
            }
        }
        return ended
    }

    /// A device the record disabled, or a token it ended, as logs show it: its token's hint
    /// (`herald.token_hint`), never the token.
    struct Ended {
        /// `device`, `activity_token` or `push_type_token`.
        var kind: String
        var id: Int64
        var hint: String
        var reason: String
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

    /// A device to soft-disable because its provider declared the token it was sent to dead, or
    /// a Live Activity token to end (`herald.dead_token`).
    struct DeadToken: PostgresComposite {
        var id: Int64
        var token: String
        var reason: String
        /// Only if the device registered the token before this (APNs' 410 timestamp).
        var since: Date?

        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(id)
            record.append(token)
            record.append(DispatchWorker.storable(reason))
            record.append(since?.timeIntervalSince1970)
        }
    }

    /// A delivery's outcome as `herald.record_sends` takes it (`herald.send_outcome`).
    struct SendOutcome: PostgresComposite {
        var id: Int64
        var result: DeliveryResult
        /// When nothing was answered: the claim's time.
        var now: Date

        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(id)
            record.append(result.state.rawValue)
            record.append(result.messageName.map(DispatchWorker.storable))
            record.append(result.uniqueID.map(DispatchWorker.storable))
            record.append(result.error.map(DispatchWorker.storable))
            record.append((result.answeredAt ?? now).timeIntervalSince1970)
            record.append(result.requeue?.dueAt.timeIntervalSince1970)
            if case .postponed = result.requeue { record.append(true) } else { record.append(false) }
            record.append(result.dead)
        }
    }

    /// A configuration found failing, or (`problem` nil) working again (`herald.config_problem`).
    struct ConfigProblem: PostgresComposite {
        var key: ProblemKey
        var problem: String?

        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(key.app)
            record.append(key.scope.rawValue)
            record.append(problem.map(DispatchWorker.storable))
        }
    }

    /// The tokens their provider declared dead: devices' push tokens; Live Activity tokens and
    /// push type tokens APNs refused, which end alone: the device's own token may well be alive.
    /// Through FCM, a dead token is the device's registration token, as for any send.
    struct DeadTokens {
        var devices: [DeadToken] = []
        var activityTokens: [DeadToken] = []
        var pushTypeTokens: [DeadToken] = []

        var isEmpty: Bool { devices.isEmpty && activityTokens.isEmpty && pushTypeTokens.isEmpty }

        mutating func append(_ other: DeadTokens) {
            devices += other.devices
            activityTokens += other.activityTokens
            pushTypeTokens += other.pushTypeTokens
        }
    }

    static func deadTokens(
        _ results: [Int64: DeliveryResult], _ deliveries: [Int64: OutgoingDelivery],
        providers: [String: any ProviderRoute.Type]
    ) -> DeadTokens {
        var dead = DeadTokens()
        for (id, result) in results {
            guard result.state == .tokenInvalid, let delivery = deliveries[id], let route = delivery.route else {
                continue
            }
            let provider = providers[route.provider]
            let reason = "\(provider?.displayName ?? route.provider): \(result.error ?? "token invalid")"
            if let live = delivery.liveActivity, provider?.sendsToActivityTokens == true {
                if let row = live.tokenRowID, let token = live.token {
                    dead.activityTokens.append(DeadToken(id: row, token: token, reason: reason))
                }
            } else if let row = delivery.device?.pushTypeTokenRowID {
                if let token = delivery.target?.deviceToken {
                    dead.pushTypeTokens.append(
                        DeadToken(id: row, token: token, reason: reason, since: result.invalidSince))
                }
            } else if let device = delivery.device?.rowID, let token = delivery.target?.deviceToken {
                dead.devices.append(DeadToken(id: device, token: token, reason: reason, since: result.invalidSince))
            }
        }
        return dead
    }

    /// Records the outcomes and releases the leases, in one statement (``SQL/record``); returns
    /// the devices it disabled and the tokens it ended. `at`: now.
    @discardableResult
    func record(
        _ outcomes: [SendOutcome], dead: DeadTokens = DeadTokens(), problems: [ProblemKey: String?], at: Date
    ) async throws -> [Ended] {
        let rows = try await context.connection.query(
            SQL.record,
            [
                outcomes, context.workerID, at, dead.devices, dead.activityTokens,
                problems.map { ConfigProblem(key: $0.key, problem: $0.value) }, dead.pushTypeTokens,
            ])
        // Written already: a row that cannot be read is logged less well, never recorded twice.
        return rows.map { row in
            Ended(
                kind: (try? row.decode("ended", as: String.self)) ?? "device",
                id: (try? row.decode("id", as: Int64.self)) ?? 0,
                hint: (try? row.decode("token_hint", as: String.self)) ?? "",
                reason: (try? row.decode("reason", as: String.self)) ?? "")
        }
    }
}
