import Foundation
import HeraldAPNs
import HeraldPostgres
import HeraldQueue
import Logging

/// Makes and deletes broadcast channels at APNs (iOS 18; Apple's channel-management API,
/// ``APNsChannelClient``). `herald.create_channel` and `herald.delete_channel` write the channel's
/// row (state `creating` or `deleting`) and a `herald.jobs` row of this kind naming it; a job
/// does what the row's state asks, with the app's APNs key or certificate:
/// - `creating`: made at APNs with its storage policy, then `active` with APNs' id. One deleted
///   while it was being made is `deleting` with that id, and deleted at APNs in turn.
/// - `deleting`: deleted at APNs, then `deleted` (also when APNs no longer knows it).
///
/// A batch's channels are worked at once, so one slow request holds back no other. APNs refusing
/// the channel itself (a 400, 403 TopicMismatch: the channel limit, another bundle's) ends it
/// `failed` with the reason; what may pass (unreachable, the app's credentials, 429, 5xx) is
/// tried again with the job queue's backoff, its reason in the row, and fails the channel once
/// the job's last attempt fails.
public struct ChannelWorker: JobHandler {
    public let kind = WorkerKind.channels.rawValue
    let context: WorkerContext
    let appSetups = AppSetups()

    public init(context: WorkerContext) { self.context = context }

    enum SQL {
        /// The channels $1, with their app's row version (for ``AppSetups``).
        static let channels =
            "SELECT id, app_id, name, stores_latest, state, channel_id, app_version FROM herald.channels_to_work($1)"
        /// Records APNs' answer $2 for channel $1 (its channel id $3, or why $4), and returns the
        /// channel's state after (`herald.record_channel_answer`, `migrations/functions/channels.sql`).
        static let recordAnswer = "SELECT herald.record_channel_answer($1, $2, $3, $4)"
        /// App $1's active channel with APNs id $2 fails: APNs refused a broadcast on it ($3).
        static let failUnknownChannel = "SELECT herald.fail_unknown_channel($1, $2, $3)"
    }

    struct Channel: Sendable {
        var id: Int64
        var app: String
        var name: String
        var storesLatest: Bool
        var state: String
        var channelID: String?
    }

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        var (ids, outcomes) = jobs.refs(naming: "channel")
        guard !ids.isEmpty else { return outcomes }
        let channels: [Channel]
        let setups: [String: AppSetup]
        do {
            let rows = try await context.connection.query(SQL.channels, [ids])
            var versions: [String: String] = [:]
            channels = try rows.map { row in
                versions[try row.decode("app_id")] = try row.decode("app_version")
                return Channel(
                    id: try row.decode("id"), app: try row.decode("app_id"), name: try row.decode("name"),
                    storesLatest: try row.decode("stores_latest"), state: try row.decode("state"),
                    channelID: try row.decode("channel_id", as: String?.self))
            }
            setups = try await appSetups.setups(versions, connection: context.connection)
        } catch {
            for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = .retry(error: "\(error)") }
            return outcomes
        }
        let byID = Dictionary(uniqueKeysWithValues: channels.map { ($0.id, $0) })
        var started: [(job: Job, channel: Channel)] = []
        for job in jobs where outcomes[job.id] == nil {
            // A channel deleted since (its app with it) asks nothing more.
            if let ref = job.ref, let channel = byID[ref] {
                started.append((job, channel))
            } else {
                outcomes[job.id] = .completed
            }
        }
        // Each child task only calls a method. Swift 6.3's optimizer miscompiled the closure
        // that did this work inline (two awaits, the outcome reassigned after `if case`): in
        // release builds its result came back as garbage, which crashed the daemon (#40).
        let answered = await withTaskGroup(of: (Int64, JobOutcome).self, returning: [(Int64, JobOutcome)].self) {
            group in
            for (job, channel) in started {
                group.addTask { [self] in (job.id, await outcome(of: job, channel, app: setups[channel.app])) }
            }
            var answered: [(Int64, JobOutcome)] = []
            for await answer in group { answered.append(answer) }
            return answered
        }
        for (id, outcome) in answered { outcomes[id] = outcome }
        return outcomes
    }

    /// One job's outcome: the channel's work, and when it is to be tried again, why it waits
    /// (or, on the job's last attempt, the channel failed).
    func outcome(of job: Job, _ channel: Channel, app: AppSetup?) async -> JobOutcome {
        let outcome = await work(channel, app: app)
        guard case .retry(let reason, _) = outcome else { return outcome }
        return await record(job.isLastAttempt ? "failed" : "waiting", channel, reason, outcome)
    }

    /// Does what the channel's state asks, and records it.
    func work(_ channel: Channel, app: AppSetup?) async -> JobOutcome {
        guard channel.state == "creating" || channel.state == "deleting" else { return .completed }
        let client: APNsChannelClient
        switch await self.client(for: app, channel: channel) {
        case .success(let made): client = made
        case .failure(let problem): return .retry(error: "\(problem)")
        }
        if channel.state == "creating" {
            switch await client.create(storesLatest: channel.storesLatest) {
            case .created(let channelID):
                do {
                    let recorded = try await context.connection.query(
                        SQL.recordAnswer, [channel.id, "created", channelID, String?.none])
                    if try recorded[0].decode(0, as: String?.self) != "active" {
                        // Deleted while APNs made it: nobody will broadcast on it, so it goes too.
                        var made = channel
                        made.state = "deleting"
                        made.channelID = channelID
                        return await work(made, app: app)
                    }
                    context.logger.info(
                        "created a broadcast channel at APNs",
                        metadata: ["app": "\(channel.app)", "channel": "\(channel.name)", "channel_id": "\(channelID)"])
                    return .completed
                } catch {
                    // Made at APNs but not recorded: the retry makes another; this one is unused.
                    return .retry(error: "could not record the channel APNs made: \(error)")
                }
            case .retry(let after, let reason):
                return .retry(error: reason, notBefore: after)
            case .refused(let reason), .unknownChannel(let reason):
                return await record("failed", channel, reason)
            case .deleted, .found, .listed:
                return .retry(error: "APNs answered a create with something else")
            }
        }
        guard let channelID = channel.channelID else { return await record("deleted", channel, nil) }
        switch await client.delete(channelID: channelID) {
        case .deleted: return await record("deleted", channel, nil)
        case .unknownChannel(let reason):
            return await record("deleted", channel, "APNs no longer knew it: \(reason)")
        case .retry(let after, let reason): return .retry(error: reason, notBefore: after)
        case .refused(let reason): return await record("failed", channel, reason)
        case .created, .found, .listed: return .retry(error: "APNs answered a delete with something else")
        }
    }

    /// The app's channel client: its APNs route's authentication (the same key or certificate
    /// and provider tokens as its pushes), for its bundle id and environment.
    func client(for app: AppSetup?, channel: Channel) async -> Result<APNsChannelClient, ConfigurationProblem> {
        guard let senders = context.senders, let app else {
            return .failure(ConfigurationProblem("app \(channel.app) is not in herald.apps, or no senders configured"))
        }
        let route: APNsRoute
        switch await senders.route(APNsRoute.self, app: app) {
        case .success(let made): route = made
        case .failure(let problem): return .failure(problem)
        }
        return .success(
            APNsChannelClient(
                authentication: route.client.authentication, bundleID: route.topic,
                environment: route.environment,
                baseURL: senders.configuration.endpoints[APNsRoute.channelsEndpoint], http: senders.http))
    }

    /// Records APNs' `answer` for the channel ("deleted", "failed", "waiting": see
    /// ``SQL/recordAnswer``), then the job's `outcome`: done once recorded, unless said otherwise.
    func record(_ answer: String, _ channel: Channel, _ reason: String?, _ outcome: JobOutcome = .completed) async
        -> JobOutcome
    {
        do {
            try await context.connection.query(
                SQL.recordAnswer, [channel.id, answer, String?.none, reason.map(DispatchWorker.storable)])
            if answer == "failed" {
                context.logger.error(
                    "a broadcast channel's request failed for good",
                    metadata: ["app": "\(channel.app)", "channel": "\(channel.name)", "reason": "\(reason ?? "")"])
                return .completed
            }
            return outcome
        } catch {
            return .retry(error: "could not record the channel's state: \(error)")
        }
    }
}
