import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Synchronization

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
///
/// A subscription comes from a browser, so what is wrong with one is that device's fault and
/// fails only its own sends: an endpoint the HTTP layer will not send to, or keys that do not
/// encrypt, make the token invalid; an endpoint outside the app's ``WebPushEndpointPolicy`` is
/// not sent to. Only a failure to sign, or refusals of the VAPID authorization by several
/// subscriptions with none accepted, are the app's configuration.
public struct WebPushClient: Sendable {
    public let authorizations: VAPIDAuthorizations
    /// Which endpoints this app's messages may go to.
    public let policy: WebPushEndpointPolicy
    /// The configuration its VAPID key is: `web` for browsers (another for a UnifiedPush app).
    public let scope: ConfigurationScope
    /// What makes refusals of the VAPID authorization independent witnesses against the app's
    /// key: two subscriptions for browsers, whose push services are few and well kept; two push
    /// services for UnifiedPush, since any distributor (one user's server) may refuse every
    /// request it gets.
    public enum RefusalWitness: Sendable { case subscription, origin }
    public let refusalsCountPer: RefusalWitness
    private let http: HTTPClient
    private let timeout: Duration
    private let clock: any WallClock
    private let refusals = RefusalMemory()

    public init(
        authorizations: VAPIDAuthorizations, http: HTTPClient, policy: WebPushEndpointPolicy = WebPushEndpointPolicy(),
        scope: ConfigurationScope = .web, refusalsCountPer: RefusalWitness = .subscription,
        timeout: Duration = .seconds(10), clock: any WallClock = SystemClock()
    ) {
        self.authorizations = authorizations
        self.policy = policy
        self.scope = scope
        self.refusalsCountPer = refusalsCountPer
        self.http = http
        self.timeout = timeout
        self.clock = clock
    }

    /// Sends messages concurrently; outcomes come in the same order.
    public func send(_ messages: [WebPushMessage]) async -> [PushOutcome] {
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var requests: [(index: Int, request: HTTPRequest)] = []
        for (index, message) in messages.enumerated() {
            switch await prepare(message) {
            case .success(let request): requests.append((index, request))
            case .failure(let outcome): outcomes[index] = outcome.outcome
            }
        }
        let results = await http.send(requests.map(\.request))
        let now = clock.now()
        var accepted = 0
        var refused: [(index: Int, reason: String)] = []
        for ((index, _), result) in zip(requests, results) {
            switch result {
            case .failure(let error):
                outcomes[index] = outcome(of: error)
            case .success(let response):
                let outcome = Self.classify(response, now: now, scope: scope)
                if case .sent = outcome { accepted += 1 }
                if case .configurationError(let reason, _) = outcome {
                    refused.append((index, reason))
                } else {
                    outcomes[index] = outcome
                }
            }
        }
        let verdicts = refusals.judge(
            accepted: accepted,
            refused: refused.map {
                let subscription = messages[$0.index].subscription
                return refusalsCountPer == .origin ? subscription.origin : subscription.endpoint
            }, now: now)
        for ((index, reason), verdict) in zip(refused, verdicts) {
            switch verdict {
            case .subscription:
                outcomes[index] = .permanentFailure(
                    reason: "\(reason): the push service refused this subscription's VAPID authorization while others"
                        + " are accepted: it was probably made with another applicationServerKey; it must be made"
                        + " again")
            case .undecided:
                outcomes[index] = .retry(
                    after: nil,
                    reason: "\(reason): the push service refused the VAPID authorization for one subscription only so"
                        + " far; not yet blamed on the app's VAPID key")
            case .app:
                outcomes[index] = .configurationError(
                    reason: "\(reason): push services refuse the VAPID authorization for several subscriptions and"
                        + " accept none; check the app's VAPID key and subject", scope: scope)
            }
        }
        return outcomes.map { $0! }
    }

    /// A message that is not sent, and why.
    struct Unsent: Error { var outcome: PushOutcome }

    /// The request for a message, or the outcome that takes its place: checked against the
    /// policy, encrypted (the browser's keys: its fault if they do not work), then signed for
    /// (the app's key: a configuration error), in that order so that the two cannot be confused.
    func prepare(_ message: WebPushMessage) async -> Result<HTTPRequest, Unsent> {
        let subscription = message.subscription
        guard policy.allows(host: subscription.host) else {
            return .failure(
                Unsent(
                    outcome: .permanentFailure(
                        reason: "the push service host \(subscription.host) is not among this app's allowed Web Push"
                            + " hosts; \(policy.settings).hosts allows more")))
        }
        let body: [UInt8]
        do {
            body = try WebPushEncryption.encrypt(message.payload, for: subscription)
        } catch let error as WebPushCipher.InvalidBrowserKey {
            return .failure(Unsent(outcome: .tokenInvalid(reason: error.description)))
        } catch let error as WebPushError {
            return .failure(Unsent(outcome: .permanentFailure(reason: error.description)))
        } catch {
            // The browser's key is valid: what failed is local (randomness, OpenSSL), and may pass.
            return .failure(Unsent(outcome: .retry(after: nil, reason: "encrypting for the browser failed: \(error)")))
        }
        let authorization: String
        do {
            authorization = try await authorizations.header(for: subscription.origin)
        } catch {
            // A signing failure is the sender's key's fault, not the message's.
            return .failure(Unsent(outcome: .configurationError(reason: "VAPID: \(error)", scope: scope)))
        }
        var headers: [(name: String, value: String)] = [
            ("Authorization", authorization),
            ("TTL", String(max(0, message.ttl))),
            ("Urgency", message.urgency.rawValue),
            ("Content-Encoding", "aes128gcm"),
            ("Content-Type", "application/octet-stream"),
        ]
        if let topic = message.topic { headers.append(("Topic", Self.topic(topic))) }
        return .success(
            HTTPRequest(
                url: subscription.endpoint, headers: headers, body: body, timeout: timeout,
                allowPrivateAddresses: policy.privateAddresses))
    }

    /// What a request that got no answer means.
    func outcome(of error: HTTPClientError) -> PushOutcome {
        switch error.kind {
        case .invalidRequest:
            // Every header is Herald's own or made safe (the topic); the endpoint is the browser's.
            return .tokenInvalid(reason: "the subscription's endpoint cannot be sent to: \(error.message)")
        case .refusedAddress:
            return .permanentFailure(
                reason: "\(error.message); \(policy.settings).private_addresses allows push services on private"
                    + " addresses")
        default:
            return .retry(after: nil, reason: error.reason(sendingTo: "push service"))
        }
    }

    /// A valid `Topic` (at most 32 characters of the URL-safe base64 alphabet, RFC 8030 §5.4):
    /// the key itself when it is one, otherwise a digest of it, so equal keys still replace
    /// each other.
    public static func topic(_ key: String) -> String {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        if !key.isEmpty, key.count <= 32, key.allSatisfy(allowed.contains) { return key }
        return String(Base64URL.encode(HMAC.sha256(key: Array("herald topic".utf8), Array(key.utf8))).prefix(32))
    }

    /// What a push service's answer means (RFC 8030 §5 and §8, RFC 8292 §4); a refused VAPID
    /// authorization is the configuration `scope`.
    public static func classify(_ response: HTTPResponse, now: Date, scope: ConfigurationScope = .web) -> PushOutcome {
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
            return .configurationError(reason: reason, scope: scope)
        case 400 where mentionsAuthorization(response):
            return .configurationError(reason: reason, scope: scope)
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

/// The client's memory of VAPID refusals, shared by its copies.
final class RefusalMemory: Sendable {
    private let state = Mutex(VAPIDRefusals())

    func judge(accepted: Int, refused: [String], now: Date) -> [VAPIDRefusals.Verdict] {
        state.withLock { $0.judge(accepted: accepted, refused: refused, now: now) }
    }
}

extension ConfigurationScope {
    /// The app's VAPID key or subject: deliveries to browsers.
    public static let web: Self = "web"
}
