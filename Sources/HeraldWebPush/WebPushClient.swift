import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP

/// One message for one browser.
public struct WebPushMessage: Sendable {
    public enum Urgency: String, Sendable {
        case veryLow = "very-low", low, normal, high
    }

    public var subscription: WebPushSubscription
    /// What the service worker receives, before encryption.
    public var payload: [UInt8]
    /// How long the push service keeps it for a browser that is offline, in seconds.
    public var ttl: Int
    public var urgency: Urgency
    /// A pending message with the same topic is replaced by this one (any string: it is
    /// turned into a valid `Topic` here).
    public var topic: String?

    public init(
        subscription: WebPushSubscription, payload: [UInt8], ttl: Int, urgency: Urgency = .normal,
        topic: String? = nil
    ) {
        self.subscription = subscription
        self.payload = payload
        self.ttl = ttl
        self.urgency = urgency
        self.topic = topic
    }
}

/// Sends Web Push messages (RFC 8030) for one application server identity: each is
/// encrypted for its browser (RFC 8291), signed for with VAPID (RFC 8292), and POSTed to its
/// endpoint over the shared HTTP/2 client, whose connections are per origin and bounded.
public struct WebPushClient: Sendable {
    public let authorizations: VAPIDAuthorizations
    private let http: HTTPClient
    private let timeout: Duration
    private let clock: any WallClock

    public init(
        authorizations: VAPIDAuthorizations, http: HTTPClient, timeout: Duration = .seconds(10),
        clock: any WallClock = SystemClock()
    ) {
        self.authorizations = authorizations
        self.http = http
        self.timeout = timeout
        self.clock = clock
    }

    /// Sends messages concurrently; outcomes come in the same order.
    public func send(_ messages: [WebPushMessage]) async -> [PushOutcome] {
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var requests: [(index: Int, request: HTTPRequest)] = []
        for (index, message) in messages.enumerated() {
            do {
                requests.append((index, try await request(for: message)))
            } catch let error as WebPushError {
                outcomes[index] = .permanentFailure(reason: error.description)
            } catch {
                // A signing failure is the sender's key's fault, not the message's.
                outcomes[index] = .configurationError(reason: "VAPID: \(error)", scope: .web)
            }
        }
        let results = await http.send(requests.map(\.request))
        let now = clock.now()
        for ((index, _), result) in zip(requests, results) {
            switch result {
            case .failure(let error):
                outcomes[index] = .retry(after: nil, reason: "push service unreachable: \(error.message)")
            case .success(let response):
                outcomes[index] = Self.classify(response, now: now)
            }
        }
        return outcomes.map { $0! }
    }

    func request(for message: WebPushMessage) async throws -> HTTPRequest {
        let body = try WebPushEncryption.encrypt(message.payload, for: message.subscription)
        var headers: [(name: String, value: String)] = [
            ("Authorization", try await authorizations.header(for: message.subscription.origin)),
            ("TTL", String(max(0, message.ttl))),
            ("Urgency", message.urgency.rawValue),
            ("Content-Encoding", "aes128gcm"),
            ("Content-Type", "application/octet-stream"),
        ]
        if let topic = message.topic { headers.append(("Topic", Self.topic(topic))) }
        return HTTPRequest(url: message.subscription.endpoint, headers: headers, body: body, timeout: timeout)
    }

    /// A valid `Topic` (at most 32 characters of the URL-safe base64 alphabet, RFC 8030 §5.4):
    /// the key itself when it is one, otherwise a digest of it, so equal keys still replace
    /// each other.
    public static func topic(_ key: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        if !key.isEmpty, key.count <= 32, key.allSatisfy(allowed.contains) { return key }
        return String(Base64URL.encode(HMAC.sha256(key: Array("herald topic".utf8), Array(key.utf8))).prefix(32))
    }

    /// What a push service's answer means (RFC 8030 §5 and §8, RFC 8292 §4).
    public static func classify(_ response: HTTPResponse, now: Date) -> PushOutcome {
        let reason = describe(response)
        switch response.status {
        case 200..<300:
            return .sent(messageName: response.header("location") ?? "")
        case 404, 410:
            return .tokenInvalid(reason: reason)
        case 413:
            return .permanentFailure(reason: reason)
        case 429, 500..<600:
            return .retry(after: response.retryAfter(now: now), reason: reason)
        case 401, 403:
            return .configurationError(reason: reason, scope: .web)
        case 400 where mentionsAuthorization(response):
            return .configurationError(reason: reason, scope: .web)
        default:
            return .permanentFailure(reason: reason)
        }
    }

    /// A 400 about the VAPID token or key is the sender's setup, not this message.
    static func mentionsAuthorization(_ response: HTTPResponse) -> Bool {
        let text = response.bodyText.lowercased()
        return ["vapid", "authorization", "jwt", "crypto-key", "audience", "subject"].contains { text.contains($0) }
    }

    static func describe(_ response: HTTPResponse) -> String {
        let text = response.bodyText.trimmingCharacters(in: .whitespacesAndNewlines)
        let status = "push service answered \(response.status)"
        return text.isEmpty ? status : "\(status): \(text.prefix(200))"
    }
}
