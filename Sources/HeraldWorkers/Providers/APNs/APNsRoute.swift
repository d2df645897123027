import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldHTTP

/// An app's iOS devices with APNs device tokens, sent straight to APNs (route `apns`): made from
/// the app's bundle id, environment, and either a token key (`.p8`; one provider token per
/// key, shared by the apps that use it) or a push certificate (whose expiry goes to
/// `herald.app_apns` and the log: ``APNsCertificates``).
struct APNsRoute: ProviderRoute {
    static let name = "apns"
    /// The key of ``Senders/Configuration/endpoints`` for APNs' channel-management API, a host of
    /// its own (`HERALD_APNS_CHANNELS_ENDPOINT`).
    static let channelsEndpoint = "apns_channels"
    static let displayName = "APNs"
    static let scopes: [ConfigurationScope] = [.apns]
    static let sendsToActivityTokens = true
    static let payloadKinds = OutgoingDelivery.PayloadKind.applePush.union([.broadcast]).union(pushTypes.keys)

    /// The payload kinds of APNs' other push types (`herald.push_types`, which
    /// ``OutgoingDelivery/pushType`` reads), and their types (`SchemaVocabularyTests` holds the
    /// two to each other).
    static let pushTypes: [OutgoingDelivery.PayloadKind: APNsNotification.PushType] = [
        .init(rawValue: "ios_widgets"): .widgets, .init(rawValue: "ios_voip"): .voip,
        .init(rawValue: "ios_location"): .location, .init(rawValue: "ios_pushtotalk"): .pushToTalk,
    ]

    /// An APNs device token (a Live Activity's own token rides on it), a broadcast channel, or
    /// a device's token for another push type.
    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        switch target {
        case .apnsDeviceToken, .channel: true
        case .token(let kind, _): pushType(ofTokenKind: kind) != nil
        case .registrationToken, .installationID, .topic, .subscription: false
        }
    }

    /// The push type a token of this kind is for, by `herald.push_types`' token kinds
    /// (`SchemaVocabularyTests` holds the two to each other).
    static func pushType(ofTokenKind kind: String) -> APNsNotification.PushType? { pushTypeTokenKinds[kind] }

    static let pushTypeTokenKinds: [String: APNsNotification.PushType] = [
        "apns_widgets_token": .widgets, "apns_voip_token": .voip, "apns_location_token": .location,
        "apns_pushtotalk_token": .pushToTalk,
    ]

    /// What APNs takes over token-based connections only: Live Activities, location queries
    /// ("supports only token-based authentication") and widget pushes (set up with tokens in
    /// Apple's steps); over a certificate they fail, and the app's alerts go on.
    static func needsProviderToken(_ kind: OutgoingDelivery.PayloadKind) -> String? {
        switch kind == .liveActivity ? .liveActivity : pushTypes[kind] {
        case .liveActivity: "Live Activities"
        case .location: "location pushes"
        case .widgets: "widget pushes"
        default: nil
        }
    }

    /// The app's row of `herald.app_apns`.
    struct Setup: Equatable, Sendable, Decodable {
        var environment: String
        var bundleID: String?
        var teamID: String?
        var keyID: String?
        var keyFile: String?
        var certificateFile: String?

        enum CodingKeys: String, CodingKey {
            case environment
            case bundleID = "bundle_id"
            case teamID = "team_id"
            case keyID = "key_id"
            case keyFile = "key_file"
            case certificateFile = "certificate_file"
        }
    }

    let client: APNsClient
    let topic: String
    /// Also the environment of its broadcast channels (``ChannelWorker``).
    let environment: APNsEnvironment
    let certificates: APNsCertificates

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> APNsRoute {
        guard let setup, let bundleID = setup.bundleID, !bundleID.isEmpty else {
            throw ConfigurationProblem("app \(app) has APNs device tokens but no bundle_id in herald.app_apns")
        }
        let authentication: APNsAuthentication
        if let file = setup.keyFile, let teamID = setup.teamID, let keyID = setup.keyID {
            do {
                authentication = .token(
                    try shared.shared("apns key \(file) \(teamID) \(keyID)") {
                        try APNsProviderTokens.load(file: file, teamID: teamID, keyID: keyID)
                    })
            } catch {
                throw ConfigurationProblem("app \(app): \(error)")
            }
        } else if let file = setup.certificateFile {
            let expiry: Date
            do {
                expiry = try Certificate.expiry(file: file)
            } catch {
                throw ConfigurationProblem("app \(app): the APNs certificate \(file): \(error)")
            }
            shared.shared("apns certificates") { APNsCertificates() }.loaded(app: app, expiry: expiry)
            authentication = .certificate(
                ClientCertificate(file: file, format: file.lowercased().hasSuffix(".p12") ? .p12 : .pem))
        } else {
            throw ConfigurationProblem(
                "app \(app) has APNs device tokens but neither an APNs key (key_file, team_id, key_id) nor a"
                    + " certificate (certificate_file) in herald.app_apns")
        }
        let environment = APNsEnvironment(rawValue: setup.environment) ?? .production
        let client = APNsClient(
            authentication: authentication, environment: environment, baseURL: shared.configuration.endpoints[name],
            http: shared.http)
        shared.logger.info(
            "loaded the APNs setup",
            metadata: [
                "app": "\(app)", "environment": "\(setup.environment)",
                "authentication": "\(setup.keyFile != nil ? "key \(setup.keyID ?? "")" : "certificate")",
            ])
        return APNsRoute(
            client: client, topic: bundleID, environment: environment,
            certificates: shared.shared("apns certificates") { APNsCertificates() })
    }

    /// APNs has no validate-only request: a dry run is built, not sent.
    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        if case .certificate = client.authentication { await certificates.report(app: batch[0].appID, context) }
        var events: [(OutgoingDelivery, DeliveryLife.Event)] = batch.filter(\.notification.dryRun).map {
            ($0, .checked(at: now))
        }
        var live = batch.filter { !$0.notification.dryRun }
        if case .certificate = client.authentication {
            events += live.compactMap { delivery in
                Self.needsProviderToken(delivery.payloadKind).map { what in
                    let refusal = PushOutcome.permanentFailure(
                        reason: "\(what) need token-based authentication: give app \(delivery.appID) an APNs key"
                            + " (key_file, team_id, key_id in herald.app_apns); APNs refuses them over a certificate")
                    return (delivery, .sent(refusal, dryRun: false, at: now))
                }
            }
            live.removeAll { Self.needsProviderToken($0.payloadKind) != nil }
        }
        if !live.isEmpty {
            let answers = await client.answers(live.map { builder.apnsNotification(for: $0, topic: topic, now: now) })
            let outcomes = Self.suspectingEnvironment(answers, appTokens: live.map(\.payloadKind.isAppToken))
            let at = context.clock.now()
            events += zip(live, outcomes).map { ($0, .sent($1, dryRun: false, at: at)) }
            await Self.failUnknownChannels(zip(live, answers), context)
        }
        return events
    }

    /// A broadcast refused because APNs does not know its channel as the app's (deleted
    /// elsewhere, or made with another key's bundle) fails its channel, with APNs' words: the
    /// next broadcasts are refused at ingest instead of each failing at APNs.
    static func failUnknownChannels(
        _ answered: Zip2Sequence<[OutgoingDelivery], [APNsClient.Answer]>, _ context: WorkerContext
    ) async {
        for (delivery, answer) in answered {
            guard case .channel(let channelID) = delivery.target, case .permanentFailure(let reason) = answer.outcome,
                let refusal = answer.reason, [.channelNotRegistered, .badChannelID, .topicMismatch].contains(refusal)
            else { continue }
            do {
                try await context.connection.query(
                    ChannelWorker.SQL.failUnknownChannel,
                    [delivery.appID, channelID, DispatchWorker.storable(reason)])
            } catch {
                context.logger.warning(
                    "could not record a channel APNs does not know", metadata: ["error": "\(error)"])
            }
        }
    }

    /// BadDeviceToken is also APNs' answer to a token of the other environment (a development
    /// build's token sent to production). When every send of a batch to a token the app itself
    /// registered (`appTokens`: a device's, or its VoIP, widget, location or Push to Talk token)
    /// got it, the app's environment is the likelier fault than all its devices at once: a
    /// configuration problem, and no token is disabled. Live Activity tokens are left out: any
    /// app registers them, and stale ones must not hold back the app's sends.
    static func suspectingEnvironment(_ answers: [APNsClient.Answer], appTokens: [Bool]) -> [PushOutcome] {
        let outcomes = answers.map(\.outcome)
        let judged = zip(answers, appTokens).filter(\.1).map(\.0)
        let refused = judged.filter { $0.reason == .badDeviceToken }
        guard refused.count >= 2, refused.count == judged.count else { return outcomes }
        let reason =
            "APNs answered BadDeviceToken to every device of the batch: is herald.app_apns.environment right"
            + " (a development build's tokens need 'development')?"
        return zip(outcomes, appTokens).map { $1 ? .configurationError(reason: reason, scope: .apns) : $0 }
    }
}

extension PayloadBuilder {
    /// The notification for an iOS device whose token is an APNs device token, for the app's
    /// bundle id (`topic`).
    public func apnsNotification(for delivery: OutgoingDelivery, topic: String, now: Date) -> APNsNotification {
        if let type = APNsRoute.pushTypes[delivery.payloadKind] {
            return pushTypeNotification(delivery, type, bundleID: topic)
        }
        let push = applePush(delivery, now: now)
        if case .channel(let channelID) = delivery.target {
            // A channel that stores no message takes only an expiration of 0 (BadExpirationDate).
            return APNsNotification(
                deviceToken: "", topic: topic, pushType: push.pushType, priority: push.priority,
                expiration: delivery.channel?.storesLatest == true ? push.expiration : Date(timeIntervalSince1970: 0),
                payload: push.payload.encodedBytes, channelID: channelID)
        }
        return APNsNotification(
            deviceToken: push.activityToken ?? delivery.target?.deviceToken ?? "",
            topic: push.pushType.topic(bundleID: topic), pushType: push.pushType,
            priority: push.priority, expiration: push.expiration, collapseID: push.collapseID,
            payload: push.payload.encodedBytes)
    }

    /// A push of another type (`herald.send_push`), with the headers and payload Apple gives
    /// for it, and no collapse id (none of them is shown to the user):
    /// - widgets: `{"aps":{"content-changed":true}}` alone, with no priority or expiration, as
    ///   in Apple's sample request; WidgetKit reloads the timelines within its budget;
    /// - VoIP and Push to Talk: priority 10 and expiration 0 (tried once by APNs, never stored:
    ///   a late call must not ring); Herald's own expiry, 30 and 10 seconds by default, bounds its
    ///   retries;
    /// - location: priority 10, or 5 for a periodic query (`normal`), stored until it expires;
    /// - all but widgets: the producer's data and Herald's keys at the top level, with no `aps`,
    ///   as PushKit's `dictionaryPayload` and the location extension read them.
    func pushTypeNotification(_ delivery: OutgoingDelivery, _ type: APNsNotification.PushType, bundleID: String)
        -> APNsNotification
    {
        let notification = delivery.notification
        let token = delivery.target?.deviceToken ?? ""
        let topic = type.topic(bundleID: bundleID)
        let payload: JSONValue = .object(
            merged(notification.data, heraldKeys(delivery)).map { ($0.0, .string($0.1)) })
        let once = Date(timeIntervalSince1970: 0)
        switch type {
        case .widgets:
            return APNsNotification(
                deviceToken: token, topic: topic, pushType: type, priority: nil, expiration: nil,
                payload: JSONValue.object([("aps", .object([("content-changed", .bool(true))]))]).encodedBytes)
        case .location:
            return APNsNotification(
                deviceToken: token, topic: topic, pushType: type, priority: notification.priority == "normal" ? 5 : 10,
                expiration: notification.expiresAt, payload: payload.encodedBytes)
        default:
            return APNsNotification(
                deviceToken: token, topic: topic, pushType: type, priority: 10, expiration: once,
                payload: payload.encodedBytes)
        }
    }
}
