import Foundation
import HeraldCrypto
import Hummingbird

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

/// A broadcast the emulator's APNs accepted.
public struct ReceivedBroadcast: Sendable {
    public var bundleID: String
    public var channelID: String
    /// The request's `apns-*` headers, names lower-cased.
    public var headers: [String: String]
    public var payload: String
    public var uniqueID: String
    public var authentication: String

    public var aps: [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any])?["aps"] as? [String: Any]
            ?? [:]
    }
}

/// APNs' provider API as Apple runs it, for tests and the demo (behind a TLS and HTTP/2 front,
/// which also checks client certificates): `POST /3/device/<token>` verifies the provider
/// token (an ES256 JWT with a known `kid`, its team as `iss`, no older than an hour) or the
/// client certificate the front verified, then the headers against the payload (push type,
/// priority 5 and `content-available` only for background pushes, topic, expiration,
/// collapse id, apns-id), the 4096-byte limit (5120 for VoIP) and the token's form; records
/// what it accepted and answers 200 with `apns-id` and `apns-unique-id`, or Apple's error, or
/// the one injected for the token.
///
/// Each push type but alert and background has a topic of its own (``topicSuffixes``), and a
/// token is good for its own push type's topic only: a token bound to a push type
/// (``bindToken(_:pushType:)``: a VoIP, widget, location or Push to Talk token) is refused
/// elsewhere with DeviceTokenNotForTopic, as is a device's own token (any token not bound) on
/// those four types' topics. Where Apple gives a rule as advice, it is held as a rule, so that
/// a test sees Herald break it: VoIP and Push to Talk pushes expire at once (0, or within a
/// minute), widget pushes carry exactly `{"aps":{"content-changed":true}}`, and none of the
/// four has a collapse id.
actor APNsService {
    /// `apns-topic` is the bundle id and this suffix, by push type.
    static let topicSuffixes: [String: String] = [
        "alert": "", "background": "", "liveactivity": LiveActivityRules.topicSuffix,
        "widgets": ".push-type.widgets", "voip": ".voip", "location": ".location-query", "pushtotalk": ".voip-ptt",
    ]
    /// The push type whose topic suffix `topic` has (no suffix ends another); nil for a bundle id.
    static func pushType(ofTopic topic: String) -> String? {
        topicSuffixes.first { !$0.value.isEmpty && topic.hasSuffix($0.value) }?.key
    }
    /// The push types whose tokens the app gets from their own frameworks.
    static let tokenBoundTypes: Set<String> = ["widgets", "voip", "location", "pushtotalk"]
    /// Push types APNs takes over token-based connections only.
    static let providerTokenOnly: Set<String> = ["liveactivity", "location", "widgets"]

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
    /// Tokens an app got for one push type (a VoIP token…), by token.
    private var tokenTypes: [String: String] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedAPNsNotification] = []
    private(set) var requests = 0
    /// Provider tokens seen, in order of first use (for tests of reuse and refresh).
    private(set) var providerTokens: [String] = []
    /// Per Live Activity token, as a device keeps it: the newest timestamp shown, and whether its
    /// activity ended.
    private var activityTimestamps: [String: Int] = [:]
    private var endedActivities: Set<String> = []

    /// Broadcast channels (iOS 18), by bundle id and channel id: each one's message storage
    /// policy (0: none stored, 1: the most recent).
    private(set) var channels: [String: [String: Int]] = [:]
    /// The broadcasts APNs accepted, oldest first.
    private(set) var broadcasts: [ReceivedBroadcast] = []

    /// A new signing key for `teamID`, trusted for `topics`: its private key as PEM (a .p8).
    func makeKey(keyID: String, teamID: String, topics: Set<String>) throws -> String {
        let key = try CryptoKey.generateP256()
        keys[keyID] = Key(
            teamID: teamID, publicKey: try CryptoKey(p256PublicPoint: try key.publicPoint()), topics: topics)
        return try key.privateKeyPEM()
    }

    func allowCertificate(topic: String) { certificateTopics.insert(topic) }

    /// Makes `token` a token of `pushType` (widgets, voip, location or pushtotalk), as the
    /// framework that gave it would: good for that push type's topic only.
    /// False for another push type.
    func bindToken(_ token: String, pushType: String) -> Bool {
        guard Self.tokenBoundTypes.contains(pushType) else { return false }
        tokenTypes[token.lowercased()] = pushType
        return true
    }

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
            // Live Activity, location and widget pushes go over token-based connections only
            // (Apple does not say which reason it gives a certificate).
            if Self.providerTokenOnly.contains(headers["apns-push-type"] ?? "") {
                return Answer(status: 400, reason: "InvalidPushType")
            }
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

    /// Authenticates a broadcast or channel-management request for `bundleID` (from its path):
    /// the provider token or the client certificate, for that bundle. Returns how, or Apple's
    /// refusal.
    private func authenticate(_ headers: [String: String], bundleID: String) -> (how: String?, refusal: Answer?) {
        if let bearer = headers["authorization"] {
            guard bearer.lowercased().hasPrefix("bearer ") else {
                return (nil, Answer(status: 403, reason: "MissingProviderToken"))
            }
            let jwt = String(bearer.dropFirst(7))
            if !providerTokens.contains(jwt) { providerTokens.append(jwt) }
            if let refusal = checkProviderToken(jwt, topic: bundleID) {
                return (
                    nil, refusal.reason == "TopicDisallowed" ? Answer(status: 403, reason: "TopicMismatch") : refusal
                )
            }
            return ("token", nil)
        }
        guard headers["x-client-verify"] == "SUCCESS" else {
            return (nil, Answer(status: 403, reason: "MissingProviderToken"))
        }
        guard certificateTopics.contains(bundleID) else { return (nil, Answer(status: 403, reason: "TopicMismatch")) }
        return ("certificate", nil)
    }

    /// The channel-management API (`/1/apps/{bundle id}/channels` and `/all-channels`, on its
    /// own host): create (201, the id in `apns-channel-id`), read one (200, its policy), delete
    /// (204), list (200, `{"channels": [...]}`). Unknown channels answer 400 ChannelNotRegistered.
    func manageChannels(method: String, bundleID: String, all: Bool, headers: [String: String], body: [UInt8])
        -> (Answer, Data?)
    {
        requests += 1
        if let refusal = authenticate(headers, bundleID: bundleID).refusal { return (refusal, nil) }
        let requestID = [("apns-request-id", headers["apns-request-id"] ?? UUID().uuidString.lowercased())]
        var known = channels[bundleID] ?? [:]
        if all {
            guard method == "GET" else { return (Answer(status: 405, reason: "MethodNotAllowed"), nil) }
            return (Answer(status: 200, reason: nil, headers: requestID), Self.json(["channels": known.keys.sorted()]))
        }
        switch method {
        case "POST":
            guard let request = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
                return (Answer(status: 400, reason: "BadRequestPayload"), nil)
            }
            guard request["push-type"] as? String == "LiveActivity" else {
                return (
                    Answer(status: 400, reason: request["push-type"] == nil ? "MissingPushType" : "InvalidPushType"),
                    nil
                )
            }
            guard let policy = request["message-storage-policy"] as? Int, policy == 0 || policy == 1 else {
                return (Answer(status: 400, reason: "BadRequestParams"), nil)
            }
            guard known.count < 10_000 else { return (Answer(status: 400, reason: "CannotCreateChannelConfig"), nil) }
            // Apple's ids are base64, as `dHN0LXNyY2gtY2hubA==`.
            let id = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            known[id] = policy
            channels[bundleID] = known
            return (Answer(status: 201, reason: nil, headers: requestID + [("apns-channel-id", id)]), nil)
        case "GET", "DELETE":
            guard let id = headers["apns-channel-id"] else {
                return (Answer(status: 400, reason: "MissingChannelId"), nil)
            }
            guard let policy = known[id] else { return (Answer(status: 400, reason: "ChannelNotRegistered"), nil) }
            if method == "GET" {
                return (
                    Answer(status: 200, reason: nil, headers: requestID),
                    Self.json(["message-storage-policy": policy, "push-type": "LiveActivity"])
                )
            }
            known[id] = nil
            channels[bundleID] = known
            return (Answer(status: 204, reason: nil, headers: requestID), nil)
        default:
            return (Answer(status: 405, reason: "MethodNotAllowed"), nil)
        }
    }

    private static func json(_ document: [String: Any]) -> Data? {
        try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
    }

    /// A broadcast (`POST /4/broadcasts/apps/{bundle id}`): to a channel of the bundle
    /// (`apns-channel-id`), a Live Activity update or end (never a start), 5120 bytes at most,
    /// and `apns-expiration: 0` on a channel that stores no message.
    func broadcast(bundleID: String, headers: [String: String], body: [UInt8]) -> Answer {
        requests += 1
        let (how, refusal) = authenticate(headers, bundleID: bundleID)
        guard let authentication = how else { return refusal ?? Answer(status: 403, reason: "Forbidden") }
        guard let id = headers["apns-channel-id"] else { return Answer(status: 400, reason: "MissingChannelId") }
        guard let policy = channels[bundleID]?[id] else { return Answer(status: 400, reason: "ChannelNotRegistered") }
        guard let pushType = headers["apns-push-type"] else { return Answer(status: 400, reason: "MissingPushType") }
        guard pushType == "liveactivity" else { return Answer(status: 400, reason: "InvalidPushType") }
        guard let priority = headers["apns-priority"], ["10", "5", "1"].contains(priority) else {
            return Answer(status: 400, reason: "BadPriority")
        }
        guard let expiration = headers["apns-expiration"].flatMap({ Int($0) }), policy == 1 || expiration == 0 else {
            return Answer(status: 400, reason: "BadExpirationDate")
        }
        guard body.count <= 5120 else { return Answer(status: 413, reason: "PayloadTooLarge") }
        guard let payload = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            let aps = payload["aps"] as? [String: Any], LiveActivityRules.problem(aps) == nil,
            aps["event"] as? String != "start"
        else { return Answer(status: 400, reason: "BadRequestPayload") }
        let uniqueID = UUID().uuidString.lowercased()
        broadcasts.append(
            ReceivedBroadcast(
                bundleID: bundleID, channelID: id, headers: headers.filter { $0.key.hasPrefix("apns-") },
                payload: String(decoding: body, as: UTF8.self), uniqueID: uniqueID, authentication: authentication))
        return Answer(
            status: 200, reason: nil,
            headers: [
                ("apns-request-id", headers["apns-request-id"] ?? UUID().uuidString.lowercased()),
                ("apns-unique-id", uniqueID),
            ])
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
        let suffix = Self.topicSuffixes[Self.pushType(ofTopic: topic) ?? ""] ?? ""
        guard key.topics.contains(String(topic.dropLast(suffix.count))) else {
            return Answer(status: 400, reason: "TopicDisallowed")
        }
        return nil
    }

    private func checkRequest(token: String, headers: [String: String], body: [UInt8]) -> Answer? {
        guard token.count >= 64, token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            return Answer(status: 400, reason: "BadDeviceToken")
        }
        let pushType = headers["apns-push-type"] ?? ""
        guard let suffix = Self.topicSuffixes[pushType] else { return Answer(status: 400, reason: "InvalidPushType") }
        guard body.count <= (pushType == "voip" ? 5120 : 4096) else {
            return Answer(status: 413, reason: "PayloadTooLarge")
        }
        guard !body.isEmpty else { return Answer(status: 400, reason: "PayloadEmpty") }
        guard let payload = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            return Answer(status: 400, reason: "BadRequestPayload")
        }
        let aps = payload["aps"] as? [String: Any] ?? [:]
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
        // The push type must match the topic's suffix, and the token the push type.
        let topic = headers["apns-topic"] ?? ""
        let topicType = Self.pushType(ofTopic: topic)
        if suffix.isEmpty ? topicType != nil : topicType != pushType {
            return Answer(status: 400, reason: topicType == nil ? "TopicDisallowed" : "InvalidPushType")
        }
        if tokenTypes[token.lowercased()] != (Self.tokenBoundTypes.contains(pushType) ? pushType : nil) {
            return Answer(status: 400, reason: "DeviceTokenNotForTopic")
        }
        if Self.tokenBoundTypes.contains(pushType), headers["apns-collapse-id"] != nil {
            return Answer(status: 400, reason: "BadCollapseId")
        }
        if ["alert", "background", "liveactivity", "widgets"].contains(pushType), payload["aps"] == nil {
            return Answer(status: 400, reason: "PayloadEmpty")
        }
        if (pushType == "liveactivity") != (aps["event"] != nil) {
            return Answer(status: 400, reason: "InvalidPushType")
        }
        switch pushType {
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
        case "widgets":
            // Apple's request: the aps dictionary says the content changed, and nothing else.
            guard aps.count == 1, aps["content-changed"] as? Bool == true, payload.count == 1 else {
                return Answer(status: 400, reason: "BadRequestPayload")
            }
            guard priority == "5" || priority == "10" else { return Answer(status: 400, reason: "BadPriority") }
        case "voip", "pushtotalk":
            // Apple: expiration 0 (or a few seconds), so that a late call does not ring; priority
            // 10 (Push to Talk's service updates may go at 5).
            guard let expiration = headers["apns-expiration"].flatMap({ Int($0) }),
                expiration == 0 || Double(expiration) <= Date().timeIntervalSince1970 + 60
            else { return Answer(status: 400, reason: "BadExpirationDate") }
            guard priority == "10" || (pushType == "pushtotalk" && priority == "5") else {
                return Answer(status: 400, reason: "BadPriority")
            }
        case "location":
            guard priority == "5" || priority == "10" else { return Answer(status: 400, reason: "BadPriority") }
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

extension APNsService: EmulatedService {
    /// APNs' sends, its broadcasts and channel management (its own host at Apple; a path here),
    /// and what makes keys and push-type tokens and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let apns = self
        router.add("POST /3/device/*") { request in
            let answer = await apns.push(
                token: String(request.path.split(separator: "/").last ?? ""), headers: request.headers,
                body: [UInt8](request.body))
            if let delay = answer.delay { try await Task.sleep(for: delay) }
            return try Self.response(answer, document: nil)
        }
        // Broadcast channels: the management API (its own host at Apple; a path here) and sends.
        for method in ["POST", "GET", "DELETE"] {
            for resource in ["channels", "all-channels"] {
                router.add("\(method) /1/apps/*/\(resource)") { request in
                    let parts = request.path.split(separator: "/")
                    let (answer, document) = await apns.manageChannels(
                        method: method, bundleID: parts.count > 2 ? String(parts[2]) : "",
                        all: resource == "all-channels", headers: request.headers,
                        body: [UInt8](request.body))
                    return try Self.response(answer, document: document)
                }
            }
        }
        router.add("POST /4/broadcasts/apps/*") { request in
            let answer = await apns.broadcast(
                bundleID: String(request.path.split(separator: "/").last ?? ""), headers: request.headers,
                body: [UInt8](request.body))
            return try Self.response(answer, document: nil)
        }
        router.add("POST /emulator/apns-keys") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let team = object["team_id"] as? String, let keyID = object["key_id"] as? String,
                let topics = object["topics"] as? [String]
            else {
                return EmulatorRouter.json(400, #"{"error":"expected {\"team_id\", \"key_id\", \"topics\": [...]}"}"#)
            }
            let pem = try await apns.makeKey(keyID: keyID, teamID: team, topics: Set(topics))
            return EmulatorRouter.response(200, contentType: "application/x-pem-file", body: Data(pem.utf8))
        }
        router.add("POST /emulator/apns-tokens") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let token = object["token"] as? String, let type = object["push_type"] as? String,
                await apns.bindToken(token, pushType: type)
            else {
                return EmulatorRouter.json(
                    400, #"{"error":"expected {\"token\", \"push_type\": widgets, voip, location or pushtotalk}"}"#)
            }
            return EmulatorRouter.json(200, "{}")
        }
        router.add("GET /emulator/apns") { _ in
            let list = await apns.received.map {
                "{\"device_token\":\(EmulatorRouter.quote($0.deviceToken)),\"apns_id\":\(EmulatorRouter.quote($0.apnsID)),\"headers\":\(String(decoding: try! JSONSerialization.data(withJSONObject: $0.headers, options: [.sortedKeys]), as: UTF8.self)),\"payload\":\($0.payload)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }

    /// APNs' answer: `{"reason": …}` (and a 410's `timestamp`) on an error, or `document` when
    /// there is one, with the answer's headers.
    static func response(_ answer: Answer, document: Data?) throws -> Response {
        var body: [String: Any] = [:]
        if let reason = answer.reason { body["reason"] = reason }
        if let timestamp = answer.timestamp { body["timestamp"] = Int64(timestamp.timeIntervalSince1970 * 1000) }
        return EmulatorRouter.response(
            answer.status, contentType: "application/json",
            body: try document ?? (body.isEmpty ? Data() : JSONSerialization.data(withJSONObject: body)),
            headers: answer.headers)
    }
}
