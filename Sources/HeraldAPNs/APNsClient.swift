import Foundation
import HeraldCore
import HeraldHTTP

/// Sends notifications to APNs for one app (its bundle id, environment and authentication)
/// over the shared HTTP/2 client, and reports a typed outcome for each, following Apple's
/// "Handling notification responses from APNs". A 403 ExpiredProviderToken gets a new token
/// and one more try.
public struct APNsClient: Sendable {
    public let authentication: APNsAuthentication
    private let baseURL: String
    private let http: HTTPClient
    private let timeout: Duration
    private let clock: any WallClock

    /// `baseURL` overrides the environment's (a local stand-in).
    public init(
        authentication: APNsAuthentication, environment: APNsEnvironment, baseURL: String? = nil, http: HTTPClient,
        timeout: Duration = .seconds(10), clock: any WallClock = SystemClock()
    ) {
        self.authentication = authentication
        let base = baseURL ?? environment.baseURL
        self.baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.http = http
        self.timeout = timeout
        self.clock = clock
    }

    /// Sends notifications concurrently; what became of each, in order.
    public func send(_ notifications: [APNsNotification]) async -> [PushOutcome] {
        await answers(notifications).map(\.outcome)
    }

    /// What became of a notification, and APNs' reason when it refused it.
    public struct Answer: Sendable {
        public var outcome: PushOutcome
        public var reason: APNsReason?
    }

    /// What became of each notification, in order, with APNs' reasons.
    public func answers(_ notifications: [APNsNotification]) async -> [Answer] {
        var outcomes = [Answer?](repeating: nil, count: notifications.count)
        var pending = Array(notifications.indices)
        for index in pending where notifications[index].payload.count > notifications[index].payloadLimit {
            outcomes[index] = Answer(
                outcome: .permanentFailure(
                    reason:
                        "payload is \(notifications[index].payload.count) bytes, over APNs' \(notifications[index].payloadLimit)"
                ))
        }
        pending.removeAll { outcomes[$0] != nil }
        for round in 0..<2 where !pending.isEmpty {
            let bearer: String?
            do {
                bearer = try await authentication.bearer()
            } catch {
                pending.forEach {
                    outcomes[$0] = Answer(outcome: .configurationError(reason: "\(error)", scope: .apns))
                }
                break
            }
            let results = await http.send(pending.map { request(for: notifications[$0], bearer: bearer) })
            let now = clock.now()
            var expired: [Int] = []
            for (index, result) in zip(pending, results) {
                switch result {
                case .failure(let error) where error.kind == .invalidRequest:
                    // A header value Herald could not send (a collapse id with CR or LF): this
                    // notification's fault alone; sending it again cannot help.
                    outcomes[index] = Answer(
                        outcome: .permanentFailure(reason: error.reason(sendingTo: "APNs")))
                case .failure(let error):
                    outcomes[index] = Answer(
                        outcome: .retry(after: nil, reason: error.reason(sendingTo: "APNs")))
                case .success(let response):
                    let outcome = Self.classify(response, sent: notifications[index], now: now)
                    let reason = response.status == 200 ? nil : APNsRefusal(response).reason
                    if reason == .expiredProviderToken, round == 0, bearer != nil {
                        expired.append(index)
                    } else {
                        outcomes[index] = Answer(outcome: outcome, reason: reason)
                    }
                }
            }
            if !expired.isEmpty { await authentication.expired(bearer) }
            pending = expired
        }
        return outcomes.map { $0! }
    }

    func request(for notification: APNsNotification, bearer: String?) -> HTTPRequest {
        var headers = notification.headers
        if let bearer { headers.append(("authorization", "bearer \(bearer)")) }
        headers.append(("content-type", "application/json"))
        return HTTPRequest(
            url: baseURL + notification.path, headers: headers, body: notification.payload,
            timeout: timeout, clientCertificate: authentication.clientCertificate)
    }

    /// What APNs' answer means. Reasons are Apple's (`{"reason": "BadDeviceToken"}`).
    public static func classify(_ response: HTTPResponse, sent notification: APNsNotification, now: Date) -> PushOutcome
    {
        if response.status == 200 {
            return .sent(
                messageName: response.header("apns-id") ?? response.header("apns-request-id")
                    ?? notification.id.uuidString.lowercased(),
                uniqueID: response.header("apns-unique-id"))
        }
        let refusal = APNsRefusal(response)
        let (body, reason, described) = (refusal.body, refusal.reason, refusal.described)
        switch (response.status, reason) {
        case (400, .badDeviceToken), (400, .deviceTokenNotForTopic):
            return .tokenInvalid(reason: described)
        case (410, _):
            // Unregistered or ExpiredToken; the timestamp (ms) is when APNs knew it invalid.
            let milliseconds = (body?["timestamp"] as? NSNumber)?.doubleValue
            return .tokenInvalid(
                reason: described, since: milliseconds.map { Date(timeIntervalSince1970: $0 / 1000) })
        case (400, .channelNotRegistered), (400, .badChannelID),
            (403, .topicMismatch)
        where notification.channelID != nil:
            // A broadcast to a channel APNs does not know as this app's: that send fails, and the
            // channel (the caller marks it failed), never the app.
            return .permanentFailure(reason: described)
        case (400, let refusal)
        where [.badTopic, .topicDisallowed, .invalidPushType].contains(refusal) && notification.pushType.isAppExtra:
            // The key or certificate does not cover this push type's topic (a certificate without
            // VoIP services, an app without the location entitlement): those pushes fail, and
            // the app's alerts go on.
            return .permanentFailure(
                reason: "\(described): the app's APNs key or certificate does not cover \(notification.topic)")
        case (403, _), (400, .badTopic), (400, .missingTopic), (400, .topicDisallowed):
            // ExpiredProviderToken (refreshed by the caller first), InvalidProviderToken,
            // BadCertificate, BadCertificateEnvironment, TopicDisallowed, MissingProviderToken…
            return .configurationError(reason: described, scope: .apns)
        case (413, _):
            return .permanentFailure(reason: described)
        case (429, _), (500..<600, _):
            // TooManyRequests (this device), TooManyProviderTokenUpdates, InternalServerError,
            // ServiceUnavailable, Shutdown.
            return .retry(after: response.retryAfter(now: now), reason: described)
        default:
            return .permanentFailure(reason: described)
        }
    }
}

extension ConfigurationScope {
    /// The app's own APNs key or certificate, bundle id or environment: iOS sent straight to APNs.
    public static let apns: Self = "apns"
}
