import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Logging
import Synchronization

extension ConfigurationScope {
    /// An app's HarmonyOS Push Kit service account (`herald.app_harmony`).
    public static let harmony: Self = "harmony"
}

/// A HarmonyOS Push Kit service account, from the key file the HUAWEI Developers API Console
/// gives: the project its messages go through, and the RSA key that signs its tokens. The
/// private key is loaded into OpenSSL and its text dropped; the account prints without it.
public struct HarmonyServiceAccount: Sendable, CustomStringConvertible {
    public var projectID: String
    public var keyID: String
    public var subAccount: String
    let key: CryptoKey

    /// Reads and checks a key file; the error says what to fix.
    public static func load(file path: String) throws(HarmonyServiceAccount.Unusable) -> HarmonyServiceAccount {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Unusable("the HarmonyOS service account file \(path) cannot be read")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw Unusable("the HarmonyOS service account file \(path) is not a JSON object")
        }
        func field(_ name: String) throws(HarmonyServiceAccount.Unusable) -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw Unusable(
                    "the HarmonyOS service account file \(path) has no \"\(name)\"; download the key again from the"
                        + " HUAWEI Developers API Console (Credentials, Service account key)")
            }
            return value
        }
        let key: CryptoKey
        do {
            key = try CryptoKey(privateKeyPEM: try field("private_key"))
        } catch let problem as Unusable {
            throw problem
        } catch {
            throw Unusable("the private_key in \(path) cannot be loaded (\(error))")
        }
        guard key.kind == .rsa else { throw Unusable("the private_key in \(path) is not an RSA key") }
        return HarmonyServiceAccount(
            projectID: try field("project_id"), keyID: try field("key_id"), subAccount: try field("sub_account"),
            key: key)
    }

    public var description: String { "HarmonyServiceAccount(project \(projectID), key id \(keyID))" }

    /// Why a key file cannot be used, in words that say what to fix.
    public struct Unusable: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}

/// The token a service account sends with each request: a JWT it signs itself (PS256, the key
/// file's `key_id` as `kid`, its `sub_account` as issuer, Huawei's token endpoint as audience),
/// which Push Kit takes as it is, with no exchange. One is reused for most of its hour.
public final class HarmonyTokens: Sendable {
    public static let audience = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
    /// Huawei's recommended validity; it refuses more than a day (80300036).
    public static let lifetime: TimeInterval = 3600
    /// A token is signed again when less than this is left, so none expires on the way.
    public static let renewal: TimeInterval = 600

    let account: HarmonyServiceAccount
    private let current = Mutex<(token: String, expires: Date)?>(nil)

    public init(account: HarmonyServiceAccount) { self.account = account }

    public func token(now: Date = Date()) throws -> String {
        if let current = current.withLock({ $0 }), current.expires.timeIntervalSince(now) > Self.renewal {
            return current.token
        }
        let issued = Int(now.timeIntervalSince1970)
        let token = try JWT.signPS256(
            header: .object([("kid", .string(account.keyID)), ("typ", .string("JWT")), ("alg", .string("PS256"))]),
            claims: .object([
                ("iss", .string(account.subAccount)), ("aud", .string(Self.audience)), ("iat", .int(issued)),
                ("exp", .int(issued + Int(Self.lifetime))),
            ]),
            key: account.key)
        current.withLock { $0 = (token, Date(timeIntervalSince1970: TimeInterval(issued) + Self.lifetime)) }
        return token
    }

    /// Push Kit said `token` expired (80200005): the next call signs a new one.
    public func expired(_ token: String) {
        current.withLock { if $0?.token == token { $0 = nil } }
    }
}

/// Sends to HarmonyOS NEXT phones through Push Kit's v3 (scenario) API
/// (`POST /v3/{project id}/messages:send`), one token a request, and reads each answer's result
/// code into a typed outcome (``HMSResult/harmonyOutcome(token:credentialsProven:)``). A token
/// Push Kit calls expired (80200005) is signed again and the message sent once more.
public struct HarmonyClient: Sendable {
    public static let pushEndpoint = "https://push-api.cloud.huawei.com"

    let tokens: HarmonyTokens
    let http: HTTPClient
    let sendURL: String
    let logger: Logger
    /// What this account has shown so far: whether Push Kit accepted a send made with it (until
    /// then, a token refused as another project's, `noRight`, says more of the account than of the
    /// phone), and whether it refused one of its images (80100022).
    let memory = Memory()

    /// Whether Push Kit has accepted a send made with this service account, as far as this client
    /// knows; ``noteCredentialsAccepted()`` tells it of one it did not see (another daemon's).
    public var credentialsAccepted: Bool { memory.accepted }
    public func noteCredentialsAccepted() { memory.noteAccepted() }

    final class Memory: Sendable {
        private let state = Mutex((accepted: false, imageRefused: false))
        var accepted: Bool { state.withLock { $0.accepted } }
        func noteAccepted() { state.withLock { $0.accepted = true } }
        /// Whether this is the first refusal.
        func noteImageRefused() -> Bool {
            state.withLock { state in
                defer { state.imageRefused = true }
                return !state.imageRefused
            }
        }
    }

    /// `endpoint`: a stand-in's base URL (nil: Huawei's).
    public init(account: HarmonyServiceAccount, endpoint: String?, http: HTTPClient, logger: Logger) {
        tokens = HarmonyTokens(account: account)
        self.http = http
        self.logger = logger
        let base = endpoint.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? Self.pushEndpoint
        sendURL = "\(base)/v3/\(account.projectID)/messages:send"
    }

    /// Sends each message (a request each, at once); the outcomes come in the same order. A
    /// message refused for its token's expiry (80200005) goes again once with a new token; one
    /// refused for its image (80100022: Push Kit shows only images it has checked) goes again
    /// without it.
    public func send(_ messages: [HarmonyMessage]) async -> [PushOutcome] {
        var messages = messages
        var results = [HMSResult?](repeating: nil, count: messages.count)
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var pending = Array(messages.indices)
        var resigned = false
        for _ in 0..<3 where !pending.isEmpty {
            let token: String
            do {
                token = try tokens.token()
            } catch {
                let outcome = PushOutcome.configurationError(
                    reason: "the HarmonyOS service account cannot sign its token: \(error)", scope: .harmony)
                pending.forEach { outcomes[$0] = outcome }
                break
            }
            let answers = await http.send(
                pending.map {
                    HTTPRequest(
                        url: sendURL,
                        headers: [
                            ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"),
                            ("push-type", String(messages[$0].pushType.rawValue)),
                        ],
                        body: messages[$0].requestBody(), timeout: .seconds(10))
                })
            var again: [Int] = []
            var expired = false
            for (index, answer) in zip(pending, answers) {
                switch answer {
                case .failure(let error) where error.kind == .invalidRequest:
                    outcomes[index] = .permanentFailure(reason: error.reason(sendingTo: "HarmonyOS Push Kit"))
                case .failure(let error):
                    outcomes[index] = .retry(after: nil, reason: error.reason(sendingTo: "HarmonyOS Push Kit"))
                case .success(let response):
                    let result = HMSResult(response)
                    if result.code == HMSResult.tokenExpired && !resigned {
                        expired = true
                        again.append(index)
                    } else if result.code == HMSResult.imageUnchecked, messages[index].withoutImage() {
                        if memory.noteImageRefused() {
                            logger.notice(
                                "HarmonyOS Push Kit refuses images it has not checked: notifications go without them",
                                metadata: ["project": "\(tokens.account.projectID)"])
                        }
                        again.append(index)
                    } else {
                        results[index] = result
                    }
                }
            }
            if expired {
                tokens.expired(token)
                resigned = true
            }
            pending = again
        }
        for index in pending where outcomes[index] == nil {
            outcomes[index] = .retry(after: nil, reason: "HarmonyOS Push Kit refused it three times")
        }
        if results.contains(where: { $0?.code == HMSResult.success }) { memory.noteAccepted() }
        let proven = memory.accepted
        return messages.indices.map { index in
            outcomes[index] ?? results[index]!.harmonyOutcome(token: messages[index].token, credentialsProven: proven)
        }
    }
}

/// One message to one token, as Push Kit's v3 API takes it: the scenario (`push-type` header)
/// and its `payload`, the token, and `pushOptions.ttl`.
public struct HarmonyMessage: Sendable {
    /// The scenarios Herald sends (Push Kit's `push-type`).
    public enum PushType: Int, Sendable {
        /// A notification Push Kit shows (`payload.notification`).
        case alert = 0
        /// Data handed to the app (`payload.extraData`): kept on the phone, newest only, until the
        /// app runs.
        case background = 6
    }

    public var token: String
    public var pushType: PushType
    public var payload: JSONValue
    /// Seconds; Push Kit keeps a message at most 15 days.
    public var ttl: Int
    /// The delivery's tag (`pushOptions.biTag`), which the message's receipt gives back.
    public var receiptTag: String?
    /// The receipt configuration its receipt goes by (`pushOptions.receiptId`); nil: the app's
    /// default.
    public var receiptID: String?

    public static let longestTTL = 15 * 86_400
    /// Push Kit's limit on a request's body, not counting its tokens.
    public static let largestBody = 4096

    public init(
        token: String, pushType: PushType, payload: JSONValue, ttl: Int, receiptTag: String? = nil,
        receiptID: String? = nil
    ) {
        self.token = token
        self.pushType = pushType
        self.payload = payload
        self.ttl = ttl
        self.receiptTag = receiptTag
        self.receiptID = receiptID
    }

    public func requestBody() -> [UInt8] {
        let options: [(String, JSONValue)] =
            [("ttl", .int(min(max(ttl, 1), Self.longestTTL)))]
            + (receiptTag.map { [("biTag", .string($0))] } ?? [])
            + (receiptID.map { [("receiptId", .string($0))] } ?? [])
        return JSONValue.object([
            ("payload", payload),
            ("target", .object([("token", .array([.string(token)]))])),
            ("pushOptions", .object(options)),
        ]).encodedBytes
    }

    /// Why Push Kit would refuse it as too large (80300008), if it would.
    public var tooLarge: String? {
        let bytes = requestBody().count - token.utf8.count
        guard bytes > Self.largestBody else { return nil }
        return "the HarmonyOS message is \(bytes) bytes without its token, over Push Kit's \(Self.largestBody);"
            + " shorten the title, body or data"
    }

    /// Drops the notification's image; false when it has none.
    mutating func withoutImage() -> Bool {
        guard case .object(var members) = payload, let at = members.firstIndex(where: { $0.0 == "notification" }),
            case .object(var shown) = members[at].1, shown.contains(where: { $0.0 == "image" })
        else { return false }
        shown.removeAll { $0.0 == "image" }
        members[at].1 = .object(shown)
        payload = .object(members)
        return true
    }
}

extension HMSResult {
    /// 80200005: the service account's token expired (the clocks disagree, or it outlived its
    /// hour); worth one more try with a new one.
    public static let tokenExpired = "80200005"
    /// 80100022: an image Push Kit has not checked (its image review).
    public static let imageUnchecked = "80100022"

    /// What a v3 answer means for the message sent to `token` (docs/architecture.md's table of
    /// answers). `credentialsProven`: Push Kit has accepted a send with this service account.
    public func harmonyOutcome(token: String, credentialsProven: Bool) -> PushOutcome {
        let words = "HarmonyOS Push Kit \(code ?? "HTTP \(status)"): \(message(without: token))"
        if status == 503 {
            // Traffic control, whatever the body says: the app sends faster than its quota.
            return .overQuota(after: retryAfter ?? Self.trafficControlPause, reason: words + " (traffic control)")
        }
        switch code {
        case Self.success:
            return .sent(messageName: requestID ?? "")
        case "80100000", Self.allTokensInvalid:
            // Some tokens refused (80100000), or all (80300007): with one token a request, the
            // reason it is listed under says whose fault it is.
            guard let reason = refusal(of: token) else {
                return code == Self.allTokensInvalid
                    ? Self.tokenRefused(reason: "all the tokens are invalid", proven: credentialsProven)
                    : .sent(messageName: requestID ?? "")
            }
            return Self.harmonyTokenRefused(reason: reason, code: code!, proven: credentialsProven)
        case "80200001", "80300002", "80300036", "80300037":
            // The token does not match the project or app; Push Kit is not enabled for it; the
            // token's validity is too long; the app is penalised.
            return .configurationError(reason: words, scope: .harmony)
        case Self.tokenExpired:
            return .configurationError(
                reason: words + " (a token signed just now: is this machine's clock right?)", scope: .harmony)
        case "80300029", "81000001":
            // The project's test messages for the day, or Push Kit's own trouble.
            return .retry(after: retryAfter, reason: words)
        case nil where status == 200:
            return .retry(after: nil, reason: "HarmonyOS Push Kit answered 200 without a result code")
        case nil where status == 404:
            return .configurationError(
                reason: "HarmonyOS Push Kit answered 404: the send URL is wrong (HERALD_PROVIDER_ENDPOINTS?)",
                scope: .harmony)
        case _ where status >= 500 || status == 429:
            return .retry(after: retryAfter, reason: words)
        case _ where status == 401:
            return .configurationError(reason: words, scope: .harmony)
        default:
            // 80100001 parameters, 80100003 payload, 80100004 TTL, 80300008 size, …: this
            // message, for good.
            return .permanentFailure(reason: words)
        }
    }

    /// A token refused under `reason` (a key of `illegalTokens`).
    public static func harmonyTokenRefused(reason: String, code: String, proven: Bool) -> PushOutcome {
        let words = "HarmonyOS Push Kit \(code): the token is refused (\(reason))"
        switch reason {
        case "tokenFormatError", "tokenPlatformNotSupport":
            // Not a token of this platform: the phone must get one again.
            return .tokenInvalid(reason: words)
        case "noRight":
            // Another project's token, or one from before the phone moved to HarmonyOS NEXT.
            return tokenRefused(reason: "the token is refused (noRight)", proven: proven)
        case "noPushTypeRight", "atomicUnableSendUnsubscribedMsg", "disableSendHuaweiMsgBecauseOfPenalty",
            "appinfoError", "noRightToSendThisLiveNotificationEvent":
            // What the app may send: its rights, its penalty, its setup in AppGallery Connect.
            return .configurationError(reason: words, scope: .harmony)
        default:
            // countryNotSupport, differentImgVerifyPolicy, and reasons not known yet: this
            // message, with Push Kit's reason.
            return .permanentFailure(reason: words)
        }
    }

    /// A token refused as not this project's: the phone's, once a send with this service account
    /// has been accepted; until then, more likely the account's (another project's key file).
    public static func tokenRefused(reason: String, proven: Bool) -> PushOutcome {
        proven
            ? .tokenInvalid(reason: "HarmonyOS Push Kit: \(reason)")
            : .configurationError(
                reason: "HarmonyOS Push Kit: \(reason), and no send with this service account has been accepted yet:"
                    + " is herald.app_harmony.service_account_file this app's project's key?",
                scope: .harmony)
    }
}
