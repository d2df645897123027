import Foundation
import HTTPTypes
import HeraldCrypto
import HeraldFCM
import Hummingbird
import Logging
import NIOCore

/// A message the emulator accepted.
public struct ReceivedMessage: Sendable {
    public var projectID: String
    /// The device token, topic, condition or FID it was addressed to.
    public var target: String
    /// The `message` object as JSON text.
    public var json: String
    public var validateOnly: Bool
    /// The name the emulator answered (`projects/<p>/messages/<n>`).
    public var name: String
    /// When it was taken.
    public var at: Date

    /// The `message` object, parsed.
    public var message: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }
}

/// A local stand-in for FCM HTTP v1, Google's OAuth token endpoint, APNs' provider API and a
/// Web Push service, for tests, the demo and app developers (Firebase's emulator suite has no
/// FCM, and Apple offers no APNs emulator).
///
/// - `POST /token` trades a service-account JWT for an access token. The JWT's RS256 signature
///   is checked against the registered account's public key, and its claims as Google does.
/// - `POST /v1/projects/{project}/messages:send` checks the bearer token and the message (one
///   target, string-only data, reserved keys, TTL format, size, background-push rules),
///   records it, and answers like FCM, or with the error injected for its token.
/// - `POST /push/{id}` is a browser subscription's endpoint (``WebPushService``). It is plain
///   HTTP here: put a TLS proxy in front (`scripts/lib/nginx-standin.sh`), since subscriptions
///   are https URLs. `POST /emulator/subscriptions` makes one (`{"base": "https://…",
///   "application_server_key": "…"}`) and answers its `PushSubscription.toJSON()`.
/// - `POST /3/device/{token}` is APNs (``APNsService``), behind the same TLS front: HTTP/2 as
///   Apple requires. `POST /emulator/apns-keys` makes a signing key for a team and its bundle
///   ids (`{"team_id": "…", "key_id": "…", "topics": ["com.example.app"]}`) and answers its
///   private key as PEM, as Apple's .p8 download. Broadcasts (`POST /4/broadcasts/apps/{bundle}`)
///   and the channel-management API (`/1/apps/{bundle}/channels`, `/all-channels`; its own host
///   at Apple, a path here) are APNs' too. `POST /emulator/apns-tokens` makes a token one of a
///   push type's (`{"token": "…", "push_type": "voip"}`), as PushKit, WidgetKit, Core Location or
///   Push to Talk gives an app its own.
/// - `POST /v1/{client id}/messages:send` and `POST /oauth2/v3/token` are Huawei Push Kit and
///   Huawei's token endpoint (``HMSService``); `POST /emulator/hms-apps` registers an app's
///   client id and secret (`{"client_id": "…", "client_secret": "…", "urgent": false}`).
/// - `POST /v3/{project id}/messages:send` is HarmonyOS Push Kit (``HarmonyService``);
///   `POST /emulator/harmony-projects` registers a project's service account
///   (`{"project_id": "…", "key_id": "…", "sub_account": "…", "public_key": "<PEM>"}`).
/// - `POST /v3/message/regid` is Xiaomi Mi Push (``XiaomiService``); `POST /emulator/xiaomi-apps`
///   registers an app's package name, AppSecret and channels (`{"package_name": "…",
///   "app_secret": "…", "channels": {"orders": "private", "news": "public"}}`).
/// - `POST /api/v1/{app id}/sendMessage` and `POST /auth/token` are Honor Push and its token
///   endpoint (``HonorService``); `POST /emulator/honor-apps` registers an app's id, client id and
///   secret (`{"app_id": "…", "client_id": "…", "client_secret": "…"}`).
/// - `POST /server/v1/message/notification/unicast` and `POST /server/v1/auth` are OPPO Push
///   (``OPPOService``); `POST /emulator/oppo-apps` registers an app's AppKey, MasterSecret,
///   channels and public daily limit (`{"app_key": "…", "master_secret": "…", "channels":
///   {"orders": "private"}, "public_daily_limit": 100000}`).
/// - `POST /message/send` and `POST /message/auth` are vivo Push and its auth (``VivoService``);
///   `POST /emulator/vivo-apps` registers an app's AppID, AppKey and AppSecret (`{"app_id": "…",
///   "app_key": "…", "app_secret": "…", "operation_limit": 5}`).
/// - `POST /emulator/fcm-devices` models FCM's store for a token's app instance (``FCMDevice``):
///   `{"token": "…", "online": false}` takes the phone offline, `"online": true` brings it back,
///   `"inactive": true` makes FCM judge it inactive; it answers what the app has received and
///   been told (`received`, `deleted_notices` for `onDeletedMessages()`) and how many wait.
/// - `GET /emulator/messages`, `GET /emulator/web-pushes`, `GET /emulator/apns` and
///   `GET /emulator/hms`, `GET /emulator/harmony`, `GET /emulator/xiaomi`, `GET /emulator/honor`,
///   `GET /emulator/oppo` and `GET /emulator/vivo` list what was
///   received;
///   `POST /emulator/behaviours` injects an error for a token or endpoint
///   (`{"token": "…", "behaviour": "unavailable", "retry_after": 1, "times": 2}`).
public final class Emulator: Sendable {
    /// The services the server answers for (each service's file may add the methods its tests
    /// call).
    let routes: EmulatorRoutes
    private var state: EmulatorState { routes.state }
    private var webPush: WebPushService { routes.webPush }
    private var apns: APNsService { routes.apns }
    private var hms: HMSService { routes.hms }
    private var harmony: HarmonyService { routes.harmony }
    private let server: LoopbackServer
    public var port: UInt16 { server.port }

    public var baseURL: String { "http://127.0.0.1:\(port)" }
    public var tokenURI: String { baseURL + "/token" }

    /// Starts the emulator on `port` (0 picks a free one) on the loopback interface.
    public static func start(port: UInt16 = 0, host: String = "127.0.0.1") async throws -> Emulator {
        let routes = EmulatorRoutes()
        let server = try await LoopbackServer.start(routes.router(), host: host, port: port)
        return Emulator(server: server, routes: routes)
    }

    private init(server: LoopbackServer, routes: EmulatorRoutes) {
        self.server = server
        self.routes = routes
    }

    /// Stops the server: it no longer listens once this returns, and requests in progress are
    /// cancelled.
    public func stop() async { await server.stop() }

    /// Trusts `account`'s key for token requests.
    public func register(_ account: ServiceAccount) async throws {
        await state.register(
            email: account.clientEmail, project: account.projectID, keyID: account.privateKeyID,
            publicKey: try CryptoKey(publicKeyPEM: try account.key.publicKeyPEM()))
    }

    /// A new service account whose `token_uri` is this emulator, already registered. Its key is
    /// the one every account this process makes shares (each still has its own email and key id).
    public func makeServiceAccount(projectID: String) async throws -> ServiceAccount {
        let account = try ServiceAccount.generate(
            projectID: projectID, tokenURI: tokenURI, key: try Self.accountKey.get())
        try await register(account)
        return account
    }

    /// Made once: making an RSA key is a search for primes, and a hundred test fixtures making
    /// theirs at once kept both of the test process's cooperative threads busy, while every
    /// server the tests run waited for them.
    private static let accountKey = Result { try CryptoKey.generateRSA() }

    /// Injects `behaviour` for sends to `token` (or to a Web Push endpoint), for the next `times`
    /// sends (nil: until changed).
    public func setBehaviour(_ behaviour: EmulatorBehaviour?, forToken token: String, times: Int? = nil) async {
        for service in routes.services { await service.setBehaviour(behaviour, token: token, times: times) }
    }

    /// The FCM Data API's delivery data for Android app `appID` of `project`: each row an
    /// `AndroidDeliveryData` object (`appId`, `date` {year, month, day}, `analyticsLabel`, `data`),
    /// served page by page as Google does.
    public func setFCMDeliveryData(project: String, appID: String, rows: [[String: Any]]) async {
        let json = rows.map {
            String(
                decoding: (try? JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys])) ?? Data("{}".utf8),
                as: UTF8.self)
        }
        await state.setDeliveryData(project: project, appID: appID, rows: json)
    }

    /// Requests the FCM Data API's stand-in took.
    public var fcmDeliveryDataRequests: Int { get async { await state.deliveryDataRequests } }

    /// Trusts a Huawei app's OAuth 2.0 client id and secret for token requests; with `urgent`,
    /// it has Huawei's right to send urgent (HIGH) messages.
    public func registerHMSApp(clientID: String, secret: String, urgent: Bool = false) async {
        await hms.registerApp(clientID: clientID, secret: secret, urgent: urgent)
    }

    /// The data messages Huawei Push Kit's stand-in accepted, and the token requests it took.
    public var hmsReceived: [ReceivedHMSMessage] { get async { await hms.received } }
    public var hmsTokenRequests: Int { get async { await hms.tokenRequests } }

    /// Expires every Huawei access token issued so far (the next send with one gets 80200003).
    public func expireHMSAccessTokens() async { await hms.expireAccessTokens() }

    /// Trusts a HarmonyOS project's service account: its key id, sub-account and public key.
    public func registerHarmonyProject(
        _ projectID: String, keyID: String, subAccount: String, publicKeyPEM: String
    ) async throws {
        try await harmony.registerProject(projectID, keyID: keyID, subAccount: subAccount, publicKeyPEM: publicKeyPEM)
    }

    /// The messages HarmonyOS Push Kit's stand-in accepted, and the distinct service-account
    /// tokens it was sent.
    public var harmonyReceived: [ReceivedHarmonyMessage] { get async { await harmony.received } }
    public var harmonyTokensSeen: Int { get async { await harmony.tokensSeen.count } }

    /// Expires every HarmonyOS service-account token seen so far (the next send with one gets
    /// 80200005).
    public func expireHarmonyTokens() async { await harmony.expireTokens() }

    /// Holds FCM project `project` to `perSecond` sends in each second of the clock (nil: no
    /// quota), answering the rest 429 as FCM answers a project over its quota (Google's
    /// ErrorInfo `RATE_LIMIT_EXCEEDED`), with `Retry-After: retryAfter` when given.
    public func setProjectQuota(_ project: String, perSecond: Int?, retryAfter: Int? = nil) async {
        await state.setProjectQuota(project, perSecond: perSecond, retryAfter: retryAfter)
    }

    /// When each of project `project`'s sends was refused for its quota.
    public func quotaRefusals(project: String) async -> [Date] { await state.quotaRefusals[project] ?? [] }

    /// A new APNs signing key for `teamID`, trusted for `topics` (bundle ids): its private key
    /// as PEM, as Apple's .p8 file.
    public func makeAPNsKey(teamID: String, keyID: String, topics: Set<String>) async throws -> String {
        try await apns.makeKey(keyID: keyID, teamID: teamID, topics: topics)
    }

    /// Accepts client certificates the TLS front verified for pushes to `topic`.
    public func allowAPNsCertificate(topic: String) async { await apns.allowCertificate(topic: topic) }

    /// Makes `token` an APNs token of `pushType` (widgets, voip, location or pushtotalk), good
    /// for that push type's topic only; false for another push type.
    @discardableResult
    public func bindAPNsToken(_ token: String, pushType: String) async -> Bool {
        await apns.bindToken(token, pushType: pushType)
    }

    public var apnsReceived: [ReceivedAPNsNotification] { get async { await apns.received } }
    /// The broadcasts APNs accepted, and its channels (by bundle id, channel id: storage policy).
    public var apnsBroadcasts: [ReceivedBroadcast] { get async { await apns.broadcasts } }
    public var apnsChannels: [String: [String: Int]] { get async { await apns.channels } }
    public var apnsRequests: Int { get async { await apns.requests } }
    /// The provider tokens APNs was sent, each once, in order of first use.
    public var apnsProviderTokens: [String] { get async { await apns.providerTokens } }

    /// A new browser subscription whose endpoint is under `base` (the https origin of the proxy
    /// in front of this emulator), bound to a VAPID public key when one is given.
    public func subscribe(base: String, applicationServerKey: String? = nil) async throws -> EmulatedSubscription {
        try await webPush.subscribe(base: base, applicationServerKey: applicationServerKey)
    }

    public var webPushes: [ReceivedWebPush] { get async { await webPush.received } }
    public var webPushRequests: Int { get async { await webPush.requests } }

    /// Answers the next `count` token requests with `status` (and an OAuth error body for 4xx).
    public func failTokenRequests(status: Int, count: Int, error: String = "temporarily_unavailable") async {
        await state.failTokenRequests(status: status, count: count, error: error)
    }

    /// The `expires_in` of access tokens issued from now on. Default 3600 s.
    public func setTokenLifetime(seconds: Int) async { await state.setTokenLifetime(seconds) }

    /// Forgets every access token issued so far, so sends with them get 401.
    public func revokeAccessTokens() async { await state.revokeAccessTokens() }

    public var received: [ReceivedMessage] { get async { await state.messages } }

    /// Models FCM's store for the app instance of `token` (``FCMDevice``): it goes offline or
    /// comes back online, and gets then what FCM kept for it.
    public func setFCMDevice(_ token: String, online: Bool) async { await state.setDevice(token, online: online) }

    /// FCM judges the app instance of `token` inactive: its messages are dropped until it connects.
    public func makeFCMDeviceInactive(_ token: String) async { await state.makeDeviceInactive(token) }

    /// What the modelled app instance of `token` received and was told; nil if it is not modelled.
    public func fcmDevice(_ token: String) async -> FCMDevice? { await state.devices[token] }
    /// The access tokens it has issued and not revoked (for tests that check they never leak).
    public var issuedAccessTokens: [String] { get async { await state.issuedAccessTokens } }
    public var tokenRequests: Int { get async { await state.tokenRequests } }
    public var sendRequests: Int { get async { await state.sendRequests } }

    deinit { server.task.cancel() }
}

/// The request handlers, over the emulator's state.
struct EmulatorRoutes {
    let state = EmulatorState()
    let webPush = WebPushService()
    let apns = APNsService()
    let hms = HMSService()
    let harmony = HarmonyService()
    let xiaomi = XiaomiService()
    let honor = HonorService()
    let oppo = OPPOService()
    let vivo = VivoService()

    /// Each provider's stand-in, in the order their routes are tried.
    var services: [any EmulatedService] { [hms, harmony, xiaomi, honor, oppo, vivo, apns, webPush, state] }

    /// The routes: each service's, then the behaviours any of them can be told to give. The
    /// first that matches a request answers it.
    func router() -> EmulatorRouter {
        var router = EmulatorRouter()
        for service in services { service.addRoutes(to: &router) }
        let services = self.services
        router.add("POST /emulator/behaviours") { request in
            let body = request.body
            guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
                let token = object["token"] as? String
            else { return EmulatorRouter.json(400, #"{"error":"expected {\"token\": …, \"behaviour\": …}"}"#) }
            let retryAfter = object["retry_after"] as? Int
            let behaviour: EmulatorBehaviour?
            switch object["behaviour"] as? String {
            case "unregistered": behaviour = .unregistered
            case "gone": behaviour = .gone
            case "payload_too_large": behaviour = .payloadTooLarge
            case "expired_provider_token": behaviour = .expiredProviderToken
            case "invalid_token": behaviour = .invalidToken
            case "sender_id_mismatch": behaviour = .senderIDMismatch
            case "quota_exceeded": behaviour = .quotaExceeded(retryAfter: retryAfter)
            case "unavailable": behaviour = .unavailable(retryAfter: retryAfter)
            case "internal": behaviour = .internalError
            case "third_party_auth_error": behaviour = .thirdPartyAuthError
            case "invalid_message": behaviour = .invalidMessage
            case "garbled_answer": behaviour = .garbledAnswer
            case "slow": behaviour = .slow(milliseconds: object["milliseconds"] as? Int ?? 1000)
            case nil, "none": behaviour = nil
            case let other?:
                return EmulatorRouter.json(400, "{\"error\":\(EmulatorRouter.quote("unknown behaviour \(other)"))}")
            }
            for service in services {
                await service.setBehaviour(behaviour, token: token, times: object["times"] as? Int)
            }
            return EmulatorRouter.json(200, "{}")
        }
        return router
    }
}

/// What every service's handlers answer with.
extension EmulatorRouter {
    static func json(_ status: Int, _ body: String) -> Response {
        response(status, contentType: "application/json; charset=UTF-8", body: Data(body.utf8))
    }

    /// A JSON answer given after `delay` (a slow provider's), with its `Retry-After` when given.
    static func json(_ status: Int, _ body: String, after delay: Duration?, retryAfter: Int?) async throws
        -> Response
    {
        if let delay { try await Task.sleep(for: delay) }
        var answer = json(status, body)
        if let retryAfter { answer.headers[.retryAfter] = "\(retryAfter)" }
        return answer
    }

    /// An answer with `body` and its `Content-Length`; `headers` are set after the content type,
    /// each replacing any of its name.
    static func response(_ status: Int, contentType: String, body: Data, headers: [(String, String)] = []) -> Response {
        var fields: HTTPFields = [.contentType: contentType]
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return Response(
            status: .init(code: status), headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func quote(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast()
            .description
    }
}
