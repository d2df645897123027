import Foundation
import HeraldCore
import HeraldCrypto
import HeraldWebPush

/// A browser subscription the emulator's push service made, with the browser's private key.
public struct EmulatedSubscription: Sendable {
    public var endpoint: String
    /// `PushSubscription.toJSON()`, as a web app hands it to its server.
    public var json: String
    /// The VAPID public key the subscription is bound to (`applicationServerKey`), if any.
    public var applicationServerKey: String?
    let key: CryptoKey
    let auth: [UInt8]
}

/// A push message the emulator accepted, decrypted as the browser would read it.
public struct ReceivedWebPush: Sendable {
    public var endpoint: String
    /// The decrypted payload.
    public var payload: String
    public var ttl: Int
    public var urgency: String?
    public var topic: String?
    /// The `Location` it answered.
    public var location: String

    public var document: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]) ?? [:]
    }
}

/// A Web Push service (RFC 8030) as the browsers' vendors run them, for tests and the demo:
/// `POST /push/<id>` checks the VAPID authorization (RFC 8292: an ES256 JWT for this origin,
/// signed by the key the subscription is bound to, expiring within 24 hours), the headers
/// (`TTL`, `Content-Encoding: aes128gcm`, `Urgency`, `Topic`) and the size, decrypts the body
/// with the subscription's private key (RFC 8291), records it and answers 201 with a
/// `Location`; or the error injected for the subscription's endpoint.
actor WebPushService {
    private var subscriptions: [String: EmulatedSubscription] = [:]
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private(set) var received: [ReceivedWebPush] = []
    private(set) var requests = 0

    struct Answer {
        var status: Int
        var text: String
        var headers: [(String, String)] = []
        var delay: Duration? = nil
    }

    /// A new subscription whose endpoint is under `base` (the push service's public origin,
    /// `https://…`).
    func subscribe(base: String, applicationServerKey: String?) throws -> EmulatedSubscription {
        let id = UUID().uuidString.lowercased()
        let key = try CryptoKey.generateP256()
        let auth = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let endpoint = "\(base)/push/\(id)"
        let json = JSONValue.object([
            ("endpoint", .string(endpoint)), ("expirationTime", .null),
            (
                "keys",
                .object([
                    ("p256dh", .string(Base64URL.encode(try key.publicPoint()))),
                    ("auth", .string(Base64URL.encode(auth))),
                ])
            ),
        ]).encoded
        let subscription = EmulatedSubscription(
            endpoint: endpoint, json: json, applicationServerKey: applicationServerKey, key: key, auth: auth)
        subscriptions[id] = subscription
        return subscription
    }

    /// `token` is a subscription's endpoint.
    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func push(id: String, headers: [String: String], body: [UInt8]) -> Answer {
        requests += 1
        guard let subscription = subscriptions[id] else {
            return Answer(status: 404, text: "no such subscription")
        }
        var delay: Duration?
        if let injected = behaviours[subscription.endpoint] {
            if let remaining = injected.remaining {
                behaviours[subscription.endpoint] = remaining <= 1 ? nil : (injected.behaviour, remaining - 1)
            }
            if case .slow(let milliseconds) = injected.behaviour {
                delay = .milliseconds(milliseconds)
            } else {
                return answer(for: injected.behaviour)
            }
        }
        if let refusal = checkAuthorization(headers["authorization"], for: subscription) {
            return Answer(status: 403, text: "VAPID authorization refused: \(refusal)")
        }
        guard let ttlText = headers["ttl"], let ttl = Int(ttlText), ttl >= 0 else {
            return Answer(status: 400, text: "the TTL header is required (RFC 8030 §5.2)")
        }
        guard headers["content-encoding"] == "aes128gcm" else {
            return Answer(status: 400, text: "Content-Encoding must be aes128gcm (RFC 8291)")
        }
        let urgency = headers["urgency"]
        if let urgency, !["very-low", "low", "normal", "high"].contains(urgency) {
            return Answer(status: 400, text: "unknown Urgency \(urgency)")
        }
        let topic = headers["topic"]
        if let topic,
            topic.count > 32 || topic.contains(where: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        {
            return Answer(status: 400, text: "a Topic is at most 32 characters of the URL-safe base64 alphabet")
        }
        guard body.count <= WebPushEncryption.maxBodyBytes else {
            return Answer(status: 413, text: "payload of \(body.count) bytes is over 4096")
        }
        let plaintext: [UInt8]
        do {
            plaintext = try WebPushEncryption.decrypt(body, receiverKey: subscription.key, auth: subscription.auth)
        } catch {
            return Answer(status: 400, text: "cannot decrypt the message: \(error)")
        }
        // A message with the same topic replaces one still pending.
        if let topic { received.removeAll { $0.endpoint == subscription.endpoint && $0.topic == topic } }
        let location = "\(WebPushSubscription.origin(of: subscription.endpoint) ?? "")/messages/\(requests)"
        received.append(
            ReceivedWebPush(
                endpoint: subscription.endpoint, payload: String(decoding: plaintext, as: UTF8.self), ttl: ttl,
                urgency: urgency, topic: topic, location: location))
        return Answer(status: 201, text: "", headers: [("Location", location)], delay: delay)
    }

    /// Why a VAPID `Authorization` header is refused, or nil when it is good.
    func checkAuthorization(_ header: String?, for subscription: EmulatedSubscription) -> String? {
        guard let header, header.hasPrefix("vapid ") else { return "no `Authorization: vapid t=…, k=…`" }
        var parameters: [String: String] = [:]
        for part in header.dropFirst(6).split(separator: ",") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2 { parameters[String(pair[0])] = String(pair[1]) }
        }
        guard let token = parameters["t"], let publicKey = parameters["k"],
            let point = Base64URL.decode(Substring(publicKey)), let key = try? CryptoKey(p256PublicPoint: point)
        else { return "t= and k= (a P-256 public key) are required" }
        if let bound = subscription.applicationServerKey, bound != publicKey {
            return "k= is not the applicationServerKey this subscription was made with"
        }
        guard let jwt = JWT.decode(token), jwt.header["alg"] as? String == "ES256",
            (try? key.verifyES256(jwt.signingInput, signature: jwt.signature)) == true
        else { return "the JWT is not ES256-signed by k=" }
        let origin = WebPushSubscription.origin(of: subscription.endpoint) ?? ""
        guard jwt.claims["aud"] as? String == origin else { return "aud must be \(origin)" }
        guard let expiry = jwt.claims["exp"] as? Int else { return "exp is required" }
        let now = Int(Date().timeIntervalSince1970)
        guard expiry > now, expiry <= now + 24 * 3600 else { return "exp must be in the next 24 hours" }
        guard let subject = jwt.claims["sub"] as? String, subject.hasPrefix("mailto:") || subject.hasPrefix("https:")
        else { return "sub must be a mailto: or https: URI" }
        return nil
    }

    private func answer(for behaviour: EmulatorBehaviour) -> Answer {
        switch behaviour {
        case .unregistered, .unregisteredSince: return Answer(status: 404, text: "subscription not found")
        case .gone: return Answer(status: 410, text: "subscription expired or unsubscribed")
        case .payloadTooLarge: return Answer(status: 413, text: "payload too large")
        case .quotaExceeded(let after):
            return Answer(
                status: 429, text: "too many requests", headers: after.map { [("Retry-After", "\($0)")] } ?? [])
        case .unavailable(let after):
            return Answer(
                status: 503, text: "service unavailable", headers: after.map { [("Retry-After", "\($0)")] } ?? [])
        case .internalError: return Answer(status: 500, text: "internal error")
        case .thirdPartyAuthError, .expiredProviderToken:
            return Answer(status: 403, text: "VAPID authorization refused: injected")
        case .invalidToken, .senderIDMismatch, .invalidMessage: return Answer(status: 400, text: "bad request")
        case .garbledAnswer: return Answer(status: 400, text: "bad\u{0}request\r\n\u{7}")
        case .slow: return Answer(status: 201, text: "")
        }
    }
}

extension WebPushService: EmulatedService {
    /// The subscriptions' endpoints, and what makes a subscription and lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let webPush = self
        router.add("POST /push/*") { request in
            let answer = await webPush.push(
                id: String(request.path.split(separator: "/").last ?? ""), headers: request.headers,
                body: [UInt8](request.body))
            if let delay = answer.delay { try await Task.sleep(for: delay) }
            return EmulatorRouter.response(
                answer.status, contentType: "text/plain; charset=UTF-8", body: Data(answer.text.utf8),
                headers: answer.headers)
        }
        router.add("POST /emulator/subscriptions") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let base = object["base"] as? String, base.hasPrefix("https://") else {
                return EmulatorRouter.json(400, #"{"error":"expected {\"base\": \"https://…\"}"}"#)
            }
            let subscription = try await webPush.subscribe(
                base: base, applicationServerKey: object["application_server_key"] as? String)
            return EmulatorRouter.json(200, subscription.json)
        }
        router.add("GET /emulator/web-pushes") { _ in
            let list = await webPush.received.map {
                "{\"endpoint\":\(EmulatorRouter.quote($0.endpoint)),\"ttl\":\($0.ttl),\"urgency\":\(EmulatorRouter.quote($0.urgency ?? "")),\"topic\":\(EmulatorRouter.quote($0.topic ?? "")),\"payload\":\($0.payload)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}
