import Foundation
import HeraldCrypto

/// A notification the emulator's APNs accepted.
public struct ReceivedAPNsNotification: Sendable {
    public var deviceToken: String
    /// The request's `apns-*` headers, names lower-cased.
    public var headers: [String: String]
    /// The JSON payload as sent.
    public var payload: String
    /// What it answered: the `apns-id` and `apns-unique-id`.
    public var apnsID: String
    public var uniqueID: String
    /// How the provider authenticated: `token` or `certificate`.
    public var authentication: String
    /// What a device would do with it: false for a Live Activity event it drops (older than
    /// the newest it showed for the token, from the future, or after the activity ended).
    public var shownByDevice = true

    public var document: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]) ?? [:]
    }

    public var aps: [String: Any] { document["aps"] as? [String: Any] ?? [:] }
}

/// APNs' provider API as Apple runs it, for tests and the demo (behind a TLS and HTTP/2 front,
/// which also checks client certificates): `POST /3/device/<token>` verifies the provider
/// token (an ES256 JWT with a known `kid`, its team as `iss`, no older than an hour) or the
/// client certificate the front verified, then the headers against the payload (push type,
/// priority 5 and `content-available` only for background pushes, topic, expiration,
/// collapse id, apns-id), the 4096-byte limit and the token's form; records what it accepted
/// and answers 200 with `apns-id` and `apns-unique-id`, or Apple's error, or the one injected
/// for the token.
actor APNsService {
    struct Key {
        var teamID: String
        var publicKey: CryptoKey
        var topics: Set<String>
    }

    struct Answer {
        var status: Int
        var reason: String?
        var headers: [(String, String)] = []
        var timestamp: Date? = nil
        var delay: Duration? = nil
    }

    private var keys: [String: Key] = [:]
    private var certificateTopics: Set<String> = []
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedAPNsNotification] = []
    private(set) var requests = 0
    /// Provider tokens seen, in order of first use (for tests of reuse and refresh).
    private(set) var providerTokens: [String] = []
    /// Per Live Activity token, as a device keeps it: the newest timestamp shown, and whether its
    /// activity ended.
    private var activityTimestamps: [String: Int] = [:]
    private var endedActivities: Set<String> = []

    /// A new signing key for `teamID`, trusted for `topics`: its private key as PEM (a .p8).
    func makeKey(keyID: String, teamID: String, topics: Set<String>) throws -> String {
        let key = try CryptoKey.generateP256()
        keys[keyID] = Key(
            teamID: teamID, publicKey: try CryptoKey(p256PublicPoint: try key.publicPoint()), topics: topics)
        return try key.privateKeyPEM()
    }

    func allowCertificate(topic: String) { certificateTopics.insert(topic) }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func push(token: String, headers: [String: String], body: [UInt8]) -> Answer {
        requests += 1
        let authentication: String
        if let bearer = headers["authorization"] {
            guard bearer.lowercased().hasPrefix("bearer ") else {
                return Answer(status: 403, reason: "MissingProviderToken")
            }
            let jwt = String(bearer.dropFirst(7))
            if !providerTokens.contains(jwt) { providerTokens.append(jwt) }
            if let refusal = checkProviderToken(jwt, topic: headers["apns-topic"]) { return refusal }
            authentication = "token"
        } else {
            // The TLS front verified the client certificate, if one was presented.
            guard headers["x-client-verify"] == "SUCCESS" else {
                return Answer(status: 403, reason: "MissingProviderToken")
            }
            guard let topic = headers["apns-topic"], certificateTopics.contains(topic) else {
                return Answer(status: 400, reason: headers["apns-topic"] == nil ? "MissingTopic" : "TopicDisallowed")
            }
            // Live Activity pushes go over token-based connections only (Apple does not say
            // which reason it gives a certificate).
            if headers["apns-push-type"] == "liveactivity" { return Answer(status: 400, reason: "InvalidPushType") }
            authentication = "certificate"
        }
        var delay: Duration?
        if let injected = behaviours[token] {
            if let remaining = injected.remaining {
                behaviours[token] = remaining <= 1 ? nil : (injected.behaviour, remaining - 1)
            }
            if case .slow(let milliseconds) = injected.behaviour {
                delay = .milliseconds(milliseconds)
            } else {
                return answer(for: injected.behaviour)
            }
        }
        if let refusal = checkRequest(token: token, headers: headers, body: body) { return refusal }
        let apnsID = headers["apns-id"] ?? UUID().uuidString.lowercased()
        let uniqueID = UUID().uuidString.lowercased()
        var notification = ReceivedAPNsNotification(
            deviceToken: token, headers: headers.filter { $0.key.hasPrefix("apns-") },
            payload: String(decoding: body, as: UTF8.self), apnsID: apnsID, uniqueID: uniqueID,
            authentication: authentication)
        if headers["apns-push-type"] == "liveactivity", let timestamp = notification.aps["timestamp"] as? Int {
            notification.shownByDevice = LiveActivityRules.shown(
                timestamp: timestamp, newest: activityTimestamps[token], ended: endedActivities.contains(token),
                now: Date())
            if notification.shownByDevice {
                activityTimestamps[token] = timestamp
                if notification.aps["event"] as? String == "end" { endedActivities.insert(token) }
            }
        }
        received.append(notification)
        return Answer(
            status: 200, reason: nil, headers: [("apns-id", apnsID), ("apns-unique-id", uniqueID)], delay: delay)
    }

    private func checkProviderToken(_ jwt: String, topic: String?) -> Answer? {
        guard let parts = JWT.decode(jwt), parts.header["alg"] as? String == "ES256",
            let keyID = parts.header["kid"] as? String, let key = keys[keyID],
            parts.claims["iss"] as? String == key.teamID,
            (try? key.publicKey.verifyES256(parts.signingInput, signature: parts.signature)) == true
        else { return Answer(status: 403, reason: "InvalidProviderToken") }
        guard let issued = parts.claims["iat"] as? Int else {
            return Answer(status: 403, reason: "InvalidProviderToken")
        }
        if Date().timeIntervalSince1970 - Double(issued) > 3600 {
            return Answer(status: 403, reason: "ExpiredProviderToken")
        }
        guard let topic else { return Answer(status: 400, reason: "MissingTopic") }
        let bundleID =
            topic.hasSuffix(LiveActivityRules.topicSuffix)
            ? String(topic.dropLast(LiveActivityRules.topicSuffix.count)) : topic
        guard key.topics.contains(bundleID) else { return Answer(status: 400, reason: "TopicDisallowed") }
        return nil
    }

    private func checkRequest(token: String, headers: [String: String], body: [UInt8]) -> Answer? {
        guard token.count >= 64, token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            return Answer(status: 400, reason: "BadDeviceToken")
        }
        guard body.count <= 4096 else { return Answer(status: 413, reason: "PayloadTooLarge") }
        guard let payload = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let aps = payload["aps"] as? [String: Any]
        else { return Answer(status: 400, reason: "PayloadEmpty") }
        let priority = headers["apns-priority"] ?? "10"
        guard ["10", "5", "1"].contains(priority) else { return Answer(status: 400, reason: "BadPriority") }
        if let expiration = headers["apns-expiration"], Int(expiration) == nil {
            return Answer(status: 400, reason: "BadExpirationDate")
        }
        if let collapse = headers["apns-collapse-id"], collapse.utf8.count > 64 {
            return Answer(status: 400, reason: "BadCollapseId")
        }
        if let id = headers["apns-id"], UUID(uuidString: id) == nil {
            return Answer(status: 400, reason: "BadMessageId")
        }
        // The push type must match the topic's suffix and the payload.
        let liveActivityTopic = headers["apns-topic"]?.hasSuffix(LiveActivityRules.topicSuffix) == true
        if (headers["apns-push-type"] == "liveactivity") != liveActivityTopic {
            return Answer(status: 400, reason: liveActivityTopic ? "InvalidPushType" : "TopicDisallowed")
        }
        if (headers["apns-push-type"] == "liveactivity") != (aps["event"] != nil) {
            return Answer(status: 400, reason: "InvalidPushType")
        }
        switch headers["apns-push-type"] {
        case "liveactivity":
            guard priority == "5" || priority == "10" else { return Answer(status: 400, reason: "BadPriority") }
            if LiveActivityRules.problem(aps) != nil { return Answer(status: 400, reason: "BadRequestPayload") }
        case "background":
            // Apple: a background push has priority 5 and content-available, and nothing to show.
            guard priority == "5", aps["content-available"] as? Int == 1, aps["alert"] == nil, aps["sound"] == nil,
                aps["badge"] == nil
            else { return Answer(status: 400, reason: "BadPriority") }
        case "alert":
            guard aps["alert"] != nil else { return Answer(status: 400, reason: "PayloadEmpty") }
            // Apple documents these values; a device ignores what it does not know, so a test
            // would not see the mistake otherwise.
            if let level = aps["interruption-level"] {
                guard let level = level as? String, ["passive", "active", "time-sensitive", "critical"].contains(level)
                else { return Answer(status: 400, reason: "BadRequestPayload") }
            }
            if let score = aps["relevance-score"] {
                guard let score = score as? Double, (0...1).contains(score) else {
                    return Answer(status: 400, reason: "BadRequestPayload")
                }
            }
        default:
            return Answer(status: 400, reason: "InvalidPushType")
        }
        return nil
    }

    private func answer(for behaviour: EmulatorBehaviour) -> Answer {
        switch behaviour {
        case .unregistered: Answer(status: 410, reason: "Unregistered", timestamp: Date())
        case .unregisteredSince(let since): Answer(status: 410, reason: "Unregistered", timestamp: since)
        case .gone: Answer(status: 410, reason: "ExpiredToken", timestamp: Date())
        case .invalidToken: Answer(status: 400, reason: "BadDeviceToken")
        case .senderIDMismatch: Answer(status: 400, reason: "DeviceTokenNotForTopic")
        case .payloadTooLarge: Answer(status: 413, reason: "PayloadTooLarge")
        case .quotaExceeded(let after):
            Answer(status: 429, reason: "TooManyRequests", headers: after.map { [("Retry-After", "\($0)")] } ?? [])
        case .unavailable(let after):
            Answer(status: 503, reason: "ServiceUnavailable", headers: after.map { [("Retry-After", "\($0)")] } ?? [])
        case .internalError: Answer(status: 500, reason: "InternalServerError")
        case .thirdPartyAuthError: Answer(status: 403, reason: "InvalidProviderToken")
        case .expiredProviderToken: Answer(status: 403, reason: "ExpiredProviderToken")
        case .invalidMessage: Answer(status: 400, reason: "BadExpirationDate")
        case .garbledAnswer: Answer(status: 400, reason: "Bad\u{0}Reason\r\n\u{7}")
        case .slow: Answer(status: 200, reason: nil)
        }
    }
}
