import Foundation
import HeraldCore
import HeraldCrypto
import HeraldEmulator
import HeraldHTTP
import HeraldTestSupport
import Testing

@testable import HeraldWebPush

/// A browser's subscription is the browser's: what is wrong with one fails its own sends, and
/// never holds the app's other browsers as a configuration error.
@Suite struct WebPushClientTests {
    /// The emulator's push service behind a TLS and HTTP/2 front, and an app's VAPID key.
    struct PushService {
        let emulator: Emulator
        let front: NginxStandIn
        let http: HTTPClient
        let authorizations: VAPIDAuthorizations

        static func start(clock: any WallClock = SystemClock()) async throws -> PushService {
            let emulator = try await Emulator.start()
            let front = try await NginxStandIn.start(upstream: emulator.port)
            var configuration = HTTPClient.Configuration()
            configuration.caBundle = front.caBundle
            let key = try VAPIDKey(key: try CryptoKey.generateP256(), subject: "mailto:push@shop.example")
            return PushService(
                emulator: emulator, front: front, http: HTTPClient(configuration: configuration),
                authorizations: VAPIDAuthorizations(key: key, clock: clock))
        }

        func client(policy: WebPushEndpointPolicy = WebPushEndpointPolicy(), clock: any WallClock = SystemClock())
            -> WebPushClient
        {
            // Far beyond the client's 10 s: with the whole suite starting at once on two cores, the
            // emulator behind nginx took over 10 s to answer once, and what these tests judge is
            // the answer, not its speed.
            WebPushClient(
                authorizations: authorizations, http: http, policy: policy, timeout: .seconds(60), clock: clock)
        }

        /// A browser subscribed with the app's key, or (`otherKey`) with some other app's.
        func subscribe(otherKey: Bool = false) async throws -> WebPushSubscription {
            let applicationServerKey =
                otherKey
                ? try VAPIDKey(key: try CryptoKey.generateP256(), subject: "mailto:x@y.example").publicKey
                : await authorizations.key.publicKey
            let made = try await emulator.subscribe(base: front.baseURL, applicationServerKey: applicationServerKey)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(made.json.utf8)) as? [String: Any])
            let keys = try #require(json["keys"] as? [String: String])
            return try WebPushSubscription(
                endpoint: made.endpoint, p256dh: try #require(Base64URL.decode(Substring(keys["p256dh"] ?? ""))),
                auth: try #require(Base64URL.decode(Substring(keys["auth"] ?? ""))))
        }
    }

    static func message(_ subscription: WebPushSubscription) -> WebPushMessage {
        WebPushMessage(subscription: subscription, payload: Array(#"{"title":"Hi"}"#.utf8), ttl: 60)
    }

    @Test func aP256dhOffTheCurveIsTheSubscriptionsFaultNotTheApps() async throws {
        let service = try await PushService.start()
        let good = try await service.subscribe()
        var offCurve = good.p256dh
        offCurve[64] ^= 1
        let broken = try WebPushSubscription(endpoint: good.endpoint + "x", p256dh: offCurve, auth: good.auth)
        let outcomes = await service.client().send([Self.message(broken), Self.message(good)])
        guard case .tokenInvalid(let reason, _) = outcomes[0] else {
            Issue.record("\(outcomes[0])")
            return
        }
        #expect(reason.contains("p256dh") && reason.contains("subscribe again"), "\(reason)")
        guard case .sent = outcomes[1] else {
            Issue.record("the healthy browser: \(outcomes[1])")
            return
        }
        #expect(await service.emulator.webPushRequests == 1)
    }

    @Test func anEndpointTheHTTPLayerRefusesIsTheSubscriptionsFault() async throws {
        let service = try await PushService.start()
        var subscription = try await service.subscribe()
        // Past the subscription's own checks (a stored subscription, edited).
        subscription.endpoint += "\r\nX-Injected: 1"
        let outcomes = await service.client().send([Self.message(subscription)])
        guard case .tokenInvalid(let reason, _) = outcomes[0] else {
            Issue.record("\(outcomes[0])")
            return
        }
        #expect(reason.contains("line feed") || reason.contains("carriage return"), "\(reason)")
        #expect(await service.emulator.webPushRequests == 0)
    }

    @Test func hostsOutsideThePolicyAreNotSentTo() async throws {
        let service = try await PushService.start()
        let subscription = try await service.subscribe()
        let client = service.client(policy: WebPushEndpointPolicy(hosts: ["*.push.example.net"]))
        let outcomes = await client.send([Self.message(subscription)])
        guard case .permanentFailure(let reason) = outcomes[0] else {
            Issue.record("\(outcomes[0])")
            return
        }
        #expect(reason.contains("127.0.0.1") && reason.contains("herald.app_webpush.hosts"), "\(reason)")
        #expect(await service.emulator.webPushRequests == 0)
        let allowed = await service.client(policy: WebPushEndpointPolicy(hosts: ["127.0.0.1"])).send([
            Self.message(subscription)
        ])
        guard case .sent = allowed[0] else {
            Issue.record("\(allowed[0])")
            return
        }
    }

    @Test func privateAddressesAreRefusedUnlessThePolicyAllowsThem() async throws {
        let service = try await PushService.start()
        let subscription = try await service.subscribe()
        let localhost = try WebPushSubscription(
            endpoint: subscription.endpoint.replacingOccurrences(of: "127.0.0.1", with: "localhost"),
            p256dh: subscription.p256dh, auth: subscription.auth)
        let client = service.client(policy: WebPushEndpointPolicy(hosts: ["*"], privateAddresses: false))
        let outcomes = await client.send([Self.message(subscription), Self.message(localhost)])
        for outcome in outcomes {
            guard case .permanentFailure(let reason) = outcome else {
                Issue.record("\(outcome)")
                continue
            }
            #expect(reason.contains("loopback") && reason.contains("herald.app_webpush.private_addresses"))
        }
        #expect(await service.emulator.webPushRequests == 0)
        #expect(try await service.front.accessLog().isEmpty)
    }

    /// A subscription made with another applicationServerKey gets the answer a broken app key
    /// would get; which it is shows in what the other subscriptions get.
    @Test func vapidRefusalsAreBlamedOnTheAppOnlyWhenNoSubscriptionIsAccepted() async throws {
        let clock = ManualClock()
        let service = try await PushService.start()
        let client = service.client(clock: clock)
        let good = try await service.subscribe()
        let stranger = try await service.subscribe(otherKey: true)
        let otherStranger = try await service.subscribe(otherKey: true)

        // Accepted in the same batch: the stranger was subscribed with another key.
        var outcomes = await client.send([Self.message(good), Self.message(stranger)])
        guard case .sent = outcomes[0], case .permanentFailure(let reason) = outcomes[1] else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(reason.contains("another applicationServerKey"), "\(reason)")
        // Within ten minutes of an acceptance, still the subscription's fault.
        clock.advance(by: .seconds(9 * 60))
        outcomes = await client.send([Self.message(stranger)])
        guard case .permanentFailure = outcomes[0] else {
            Issue.record("\(outcomes)")
            return
        }

        // Ten minutes without an acceptance: one refused subscription is not yet the app's fault…
        clock.advance(by: .seconds(11 * 60))
        outcomes = await client.send([Self.message(stranger)])
        guard case .retry(nil, let undecided) = outcomes[0] else {
            Issue.record("\(outcomes)")
            return
        }
        #expect(undecided.contains("not yet blamed"), "\(undecided)")
        // …two are.
        outcomes = await client.send([Self.message(otherStranger)])
        guard case .configurationError(_, .web) = outcomes[0] else {
            Issue.record("\(outcomes)")
            return
        }
    }

    @Test func theRefusalMemoryJudgesByWhatElseWasAcceptedOrRefused() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var memory = VAPIDRefusals()
        #expect(memory.judge(accepted: 0, refused: ["a"], now: start) == [.undecided])
        #expect(memory.judge(accepted: 0, refused: ["a"], now: start + 60) == [.undecided], "the same endpoint again")
        #expect(memory.judge(accepted: 0, refused: ["b"], now: start + 120) == [.app])
        // Two refused in one batch are two at once.
        memory = VAPIDRefusals()
        #expect(memory.judge(accepted: 0, refused: ["a", "b"], now: start) == [.app, .app])
        // An acceptance in the batch, or within ten minutes, vouches for the key.
        #expect(memory.judge(accepted: 1, refused: ["c"], now: start + 1) == [.subscription])
        #expect(memory.judge(accepted: 0, refused: ["d"], now: start + 599) == [.subscription])
        // Refusals older than ten minutes are forgotten.
        memory = VAPIDRefusals()
        #expect(memory.judge(accepted: 0, refused: ["a"], now: start) == [.undecided])
        #expect(memory.judge(accepted: 0, refused: ["b"], now: start + 601) == [.undecided])
        // An acceptance forgets the refusals before it.
        memory = VAPIDRefusals()
        _ = memory.judge(accepted: 0, refused: ["a"], now: start)
        _ = memory.judge(accepted: 1, refused: [], now: start + 10)
        #expect(memory.judge(accepted: 0, refused: ["b"], now: start + 700) == [.undecided])
    }

    @Test(arguments: [
        ("push.example.com", ["push.example.com"], true), ("PUSH.Example.com", ["push.example.COM"], true),
        ("a.example.com", ["*.example.com"], true), ("a.b.example.com", ["*.example.com"], true),
        ("example.com", ["*.example.com"], false), ("evilexample.com", ["*.example.com"], false),
        ("example.com.evil.net", ["*.example.com"], false), ("anything.net", ["*"], true),
        ("push.example.com", [], false), ("fcm.googleapis.com", ["push.example.com", "fcm.googleapis.com"], true),
    ])
    func hostPatterns(host: String, patterns: [String], allowed: Bool) {
        #expect(WebPushEndpointPolicy(hosts: patterns).allows(host: host) == allowed)
    }

    @Test(arguments: [
        "http://push.example.net/x", "https://", "https:///x", "https://user@push.example.net/x",
        "https://push.example.net@169.254.169.254/x", "https://push.example.net:0/x",
        "https://push.example.net:99999/x",
        "https://push.example.net:/x", "https://push.example.net:44a/x", "https://push example.net/x",
        "https://push.example.net/a b", "https://push.example.net/a\r\nX: y", "https://push.example.net/a\u{0}",
        "https://push.example.net/\u{7F}", "https://push.exam_ple.net/x", "https://[::1/x", "https://[zz::1]/x",
        "https://[::1]x/y", "https://push.example.net?x", "https://push.example.net/é",
    ])
    func endpointsAreCheckedStrictly(endpoint: String) throws {
        let key = try CryptoKey.generateP256().publicPoint()
        #expect(throws: WebPushError.self, "\(endpoint.debugDescription)") {
            try WebPushSubscription(endpoint: endpoint, p256dh: key, auth: Array(repeating: 1, count: 16))
        }
    }

    @Test(arguments: [
        ("https://fcm.googleapis.com/fcm/send/abc:APA91b-x_y", "fcm.googleapis.com"),
        ("https://Updates.Push.Services.Mozilla.com/wpush/v2/gAAAA", "updates.push.services.mozilla.com"),
        ("https://127.0.0.1:8443/push/1", "127.0.0.1"), ("https://[::1]:8443/push/1", "[::1]"),
        ("https://[2001:db8::1]/p", "[2001:db8::1]"), ("https://web.push.apple.com", "web.push.apple.com"),
    ])
    func goodEndpointsAreAccepted(endpoint: String, host: String) throws {
        let key = try CryptoKey.generateP256().publicPoint()
        let subscription = try WebPushSubscription(
            endpoint: endpoint, p256dh: key, auth: Array(repeating: 1, count: 16))
        #expect(subscription.host == host)
    }
}
