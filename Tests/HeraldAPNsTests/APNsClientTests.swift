import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldEmulator
import HeraldHTTP
import HeraldTestSupport
import Testing

/// Provider tokens, Apple's answers as outcomes, and push certificates' expiry.
@Suite final class APNsClientTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @Test func theProviderTokenNamesKeyAndTeamAndIsReusedFor50Minutes() async throws {
        let key = try CryptoKey.generateP256()
        let clock = ManualClock()
        let tokens = try APNsProviderTokens(teamID: "TEAM123456", keyID: "KEY1234567", key: key, clock: clock)
        let first = try await tokens.token()
        let parts = try #require(JWT.decode(first))
        #expect(parts.header["alg"] as? String == "ES256")
        #expect(parts.header["kid"] as? String == "KEY1234567")
        #expect(parts.claims["iss"] as? String == "TEAM123456")
        #expect(parts.claims["iat"] as? Int == Int(clock.now().timeIntervalSince1970))
        #expect(parts.claims.count == 2, "iss and iat only")
        let publicKey = try CryptoKey(p256PublicPoint: try key.publicPoint())
        #expect(try publicKey.verifyES256(parts.signingInput, signature: parts.signature))

        clock.advance(by: .seconds(49 * 60))
        #expect(try await tokens.token() == first)
        clock.advance(by: .seconds(2 * 60))
        let second = try await tokens.token()
        #expect(second != first, "replaced after 50 minutes, before APNs' hour")
        // APNs refuses tokens replaced more often than every 20 minutes.
        #expect(try await tokens.expired(second) == second, "a fresh token is not replaced on APNs' word")
        clock.advance(by: .seconds(21 * 60))
        let third = try await tokens.expired(second)
        #expect(third != second, "APNs' word replaces a token 20 minutes old")
        #expect(try await tokens.expired(second) == third, "a stale report does not replace the new one")
        #expect(await tokens.signed == 3)
    }

    @Test func aKeyThatIsNotP256IsRefused() async throws {
        #expect(throws: APNsError.self) {
            try APNsProviderTokens(teamID: "T", keyID: "K", key: try CryptoKey.generateRSA(bits: 1024))
        }
        #expect(throws: APNsError.self) {
            try APNsProviderTokens.load(file: path("missing.p8"), teamID: "T", keyID: "K")
        }
    }

    static let notification = APNsNotification(
        deviceToken: String(repeating: "ab", count: 32), topic: "com.example.shop", pushType: .alert, priority: 10,
        expiration: Date(timeIntervalSince1970: 1_900_000_000), collapseID: "42",
        id: UUID(uuidString: "6A1E2F1C-64D2-4C9E-9A1B-0F4E6A0C5B11")!, payload: Array(#"{"aps":{"alert":"Hi"}}"#.utf8))

    @Test func theRequestCarriesApplesHeaders() {
        let headers = Dictionary(uniqueKeysWithValues: Self.notification.headers.map { ($0.name, $0.value) })
        #expect(headers["apns-topic"] == "com.example.shop")
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == "1900000000")
        #expect(headers["apns-collapse-id"] == "42")
        #expect(headers["apns-id"] == "6a1e2f1c-64d2-4c9e-9a1b-0f4e6a0c5b11")
    }

    @Test(arguments: [
        (200, #""#, "sent"), (400, #"{"reason":"BadDeviceToken"}"#, "token"),
        (400, #"{"reason":"DeviceTokenNotForTopic"}"#, "token"),
        (410, #"{"reason":"Unregistered","timestamp":1800000000000}"#, "token since"),
        (410, #"{"reason":"ExpiredToken"}"#, "token"),
        (403, #"{"reason":"InvalidProviderToken"}"#, "configuration"),
        (403, #"{"reason":"BadCertificateEnvironment"}"#, "configuration"),
        (400, #"{"reason":"TopicDisallowed"}"#, "configuration"), (400, #"{"reason":"BadTopic"}"#, "configuration"),
        (400, #"{"reason":"MissingTopic"}"#, "configuration"),
        (413, #"{"reason":"PayloadTooLarge"}"#, "permanent"), (400, #"{"reason":"BadCollapseId"}"#, "permanent"),
        (429, #"{"reason":"TooManyRequests"}"#, "retry"), (429, #"{"reason":"TooManyProviderTokenUpdates"}"#, "retry"),
        (500, #"{"reason":"InternalServerError"}"#, "retry"), (503, #"{"reason":"ServiceUnavailable"}"#, "retry"),
        (503, #"{"reason":"Shutdown"}"#, "retry"),
    ])
    func answersBecomeOutcomes(status: Int, body: String, expected: String) {
        let headers =
            status == 200 ? [("apns-id", "6a1e2f1c-64d2-4c9e-9a1b-0f4e6a0c5b11"), ("apns-unique-id", "u-1")] : []
        let outcome = APNsClient.classify(
            HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), sent: Self.notification, now: Date()
        )
        switch (outcome, expected) {
        case (.sent(let id, let unique), "sent"):
            #expect(id == "6a1e2f1c-64d2-4c9e-9a1b-0f4e6a0c5b11")
            #expect(unique == "u-1")
        case (.tokenInvalid(_, let since), "token"): #expect(since == nil || status == 410)
        case (.tokenInvalid(_, let since), "token since"): #expect(since == Date(timeIntervalSince1970: 1_800_000_000))
        case (.configurationError(_, let scope), "configuration"): #expect(scope == .apns)
        case (.permanentFailure, "permanent"), (.retry, "retry"): break
        default: Issue.record("\(status) \(body): \(outcome), expected \(expected)")
        }
    }

    /// The emulator's APNs behind nginx (TLS, HTTP/2), and a client with a key it trusts for
    /// com.example.shop; the front lives as long as the caller keeps it.
    func clientOfTheStandIn() async throws -> (client: APNsClient, emulator: Emulator, front: NginxStandIn) {
        let emulator = try await Emulator.start()
        let front = try await NginxStandIn.start(upstream: emulator.port)
        let keyFile = path("AuthKey.p8")
        try Data(
            try await emulator.makeAPNsKey(teamID: "TEAM123456", keyID: "KEY1234567", topics: ["com.example.shop"]).utf8
        ).write(to: URL(fileURLWithPath: keyFile))
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = front.caBundle
        let client = APNsClient(
            authentication: .token(
                try APNsProviderTokens.load(file: keyFile, teamID: "TEAM123456", keyID: "KEY1234567")),
            environment: .development, baseURL: front.baseURL, http: HTTPClient(configuration: configuration))
        return (client, emulator, front)
    }

    /// A collapse id is the producer's: one with CR and LF must not become a second header
    /// (`apns-topic: evil`), nor hold the app, nor be retried. It fails alone; the rest is sent.
    @Test func aCollapseIDWithCRLFFailsAloneAndNeverReachesAPNs() async throws {
        let (client, emulator, front) = try await clientOfTheStandIn()
        defer { withExtendedLifetime(front) {} }
        var injected = Self.notification
        injected.id = UUID()
        injected.collapseID = "x\r\napns-topic: evil"
        var healthy = Self.notification
        healthy.id = UUID()

        let outcomes = await client.send([injected, healthy])
        guard case .permanentFailure(let reason) = outcomes[0] else {
            Issue.record("the injected notification: \(outcomes[0])")
            return
        }
        #expect(reason.contains("apns-collapse-id") && !reason.contains("evil"), "\(reason)")
        guard case .sent = outcomes[1] else {
            Issue.record("the healthy notification: \(outcomes[1])")
            return
        }
        #expect(await emulator.apnsRequests == 1)
        #expect(await emulator.apnsReceived.count == 1)
    }

    /// Each push type's topic is the bundle id with Apple's suffix; a header left nil (a widget
    /// push's priority and expiration) is not sent; VoIP payloads may be 5120 bytes.
    @Test func eachPushTypeHasApplesTopicAndOnlyItsHeaders() {
        let suffixes: [APNsNotification.PushType: String] = [
            .alert: "", .background: "", .liveActivity: ".push-type.liveactivity", .widgets: ".push-type.widgets",
            .voip: ".voip", .location: ".location-query", .pushToTalk: ".voip-ptt",
        ]
        #expect(Set(suffixes.keys) == Set(APNsNotification.PushType.allCases))
        for (type, suffix) in suffixes {
            #expect(type.topic(bundleID: "com.example.shop") == "com.example.shop" + suffix)
        }
        #expect(APNsNotification.PushType.allCases.filter(\.isAppExtra) == [.widgets, .voip, .location, .pushToTalk])
        var widgets = Self.notification
        (widgets.pushType, widgets.priority, widgets.expiration, widgets.collapseID) = (.widgets, nil, nil, nil)
        #expect(widgets.headers.map(\.name) == ["apns-topic", "apns-push-type", "apns-id"])
        var voip = Self.notification
        voip.pushType = .voip
        #expect(voip.payloadLimit == 5120 && Self.notification.payloadLimit == 4096)
    }

    /// A topic the key or certificate does not cover, for a push type only some apps are set up
    /// for, fails that push: the app's notifications are not held as a configuration problem.
    @Test(arguments: ["TopicDisallowed", "BadTopic", "InvalidPushType"])
    func aTopicTheCredentialsDoNotCoverFailsThatPushTypeNotTheApp(reason: String) {
        var voip = Self.notification
        (voip.pushType, voip.topic) = (.voip, "com.example.shop.voip")
        let refusal = HTTPResponse(status: 400, headers: [], body: Array(#"{"reason":"\#(reason)"}"#.utf8))
        guard case .permanentFailure(let why) = APNsClient.classify(refusal, sent: voip, now: Date()) else {
            Issue.record("\(reason) to a VoIP push")
            return
        }
        #expect(why.hasSuffix("does not cover com.example.shop.voip"), "\(why)")
        if reason != "InvalidPushType" {
            guard case .configurationError = APNsClient.classify(refusal, sent: Self.notification, now: Date()) else {
                Issue.record("\(reason) to an alert")
                return
            }
        }
    }

    /// The emulator's APNs holds each push type to its token and Apple's rules for it, so that a
    /// test sees Herald break one: a device's own token is not for VoIP, a VoIP token not for
    /// alerts; a widget push is only "content changed"; VoIP goes with expiration 0 and no
    /// collapse id.
    @Test func theStandInHoldsEachPushTypeToItsTokenAndRules() async throws {
        let (client, emulator, front) = try await clientOfTheStandIn()
        defer { withExtendedLifetime(front) {} }
        let voipToken = String(repeating: "cd", count: 32)
        await emulator.bindAPNsToken(voipToken, pushType: "voip")
        func push(
            _ type: APNsNotification.PushType, token: String, priority: Int? = 10,
            expiration: Date? = .init(timeIntervalSince1970: 0),
            collapseID: String? = nil, payload: String = #"{"call":"1"}"#
        ) -> APNsNotification {
            APNsNotification(
                deviceToken: token, topic: type.topic(bundleID: "com.example.shop"), pushType: type, priority: priority,
                expiration: expiration, collapseID: collapseID, payload: Array(payload.utf8))
        }
        let alertToken = Self.notification.deviceToken
        let cases: [(APNsNotification, String?)] = [
            (push(.voip, token: voipToken), nil),
            (push(.voip, token: alertToken), "DeviceTokenNotForTopic"),
            (push(.alert, token: voipToken, payload: #"{"aps":{"alert":"Hi"}}"#), "DeviceTokenNotForTopic"),
            (push(.voip, token: voipToken, expiration: Date().addingTimeInterval(3600)), "BadExpirationDate"),
            (push(.voip, token: voipToken, collapseID: "c"), "BadCollapseId"),
            (push(.voip, token: voipToken, priority: 5), "BadPriority"),
            (
                push(
                    .widgets, token: voipToken, priority: nil, expiration: nil,
                    payload: #"{"aps":{"content-changed":true}}"#), "DeviceTokenNotForTopic"
            ),
        ]
        let answers = await client.answers(cases.map(\.0))
        for ((notification, expected), answer) in zip(cases, answers) {
            #expect(
                answer.reason?.rawValue == expected,
                "\(notification.pushType) to \(notification.deviceToken.prefix(4)): \(answer.outcome)")
        }
        let widgetsToken = String(repeating: "ef", count: 32)
        await emulator.bindAPNsToken(widgetsToken, pushType: "widgets")
        let widgets = await client.answers([
            push(
                .widgets, token: widgetsToken, priority: nil, expiration: nil,
                payload: #"{"aps":{"content-changed":true}}"#),
            push(
                .widgets, token: widgetsToken, priority: nil, expiration: nil,
                payload: #"{"aps":{"content-changed":true},"extra":"1"}"#),
        ])
        #expect(widgets.map(\.reason?.rawValue) == [nil, "BadRequestPayload"])
        #expect(await emulator.apnsReceived.count == 2)
    }

    @Test(arguments: ["pem", "p12"])
    func aCertificatesExpiryIsRead(format: String) async throws {
        let made = try await runProgram(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "10",
                "-subj", "/UID=com.example.shop/CN=Apple Development IOS Push Services: com.example.shop",
                "-keyout", path("key.pem"), "-out", path("cert.pem"),
            ])
        try #require(made.status == 0, "\(made.output)")
        var file = path("cert.pem")
        if format == "p12" {
            let exported = try await runProgram(
                "/usr/bin/openssl",
                [
                    "pkcs12", "-export", "-in", path("cert.pem"), "-inkey", path("key.pem"), "-passout", "pass:",
                    "-out", path("cert.p12"),
                ])
            try #require(exported.status == 0, "\(exported.output)")
            file = path("cert.p12")
        }
        let expiry = try Certificate.expiry(file: file)
        #expect(abs(expiry.timeIntervalSinceNow - 10 * 86_400) < 120)
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: path("bad.pem")))
        #expect(throws: CryptoError.self) { try Certificate.expiry(file: path("bad.pem")) }
    }
}
