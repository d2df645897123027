import Foundation
import HeraldCore
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import HeraldTestSupport
import Testing

@Suite struct FCMClientTests {
    struct Fixture {
        let emulator: Emulator
        let client: FCMClient
    }

    func fixture(project: String = "herald-test") async throws -> Fixture {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: project)
        // A minute, not FCM's 10 s nor the client's 10 s to connect: these tests are about what
        // answers mean, and the suite's start (databases, clusters and servers made at once on
        // two cores) can hold the emulator's answers back for 20 s (a send once failed as
        // "Operation timed out after 10029 milliseconds with 0 bytes received").
        var configuration = HTTPClient.Configuration()
        configuration.connectTimeout = .seconds(60)
        let http = HTTPClient(configuration: configuration)
        let client = FCMClient(
            tokens: AccessTokenSource(account: account, http: http), http: http,
            configuration: .init(endpoint: emulator.baseURL, timeout: .seconds(60)))
        return Fixture(emulator: emulator, client: client)
    }

    func message(_ token: String) -> FCMMessage {
        FCMMessage(
            target: .token(token), data: [("title", "Hi"), ("body", "There")],
            android: .init(priority: .high, ttl: .seconds(3600)))
    }

    @Test func sentMessageCarriesTheNameAndArrivesIntact() async throws {
        let f = try await fixture()
        let outcome = await f.client.send(message("device-1"))
        #expect(outcome == .sent(messageName: "projects/herald-test/messages/1"))
        let received = try #require(await f.emulator.received.first)
        #expect(received.target == "device-1")
        #expect(received.validateOnly == false)
        #expect((received.message["data"] as? [String: String])?["title"] == "Hi")
        #expect((received.message["android"] as? [String: Any])?["ttl"] as? String == "3600s")
    }

    @Test func dryRunIsSentWithValidateOnly() async throws {
        let f = try await fixture()
        _ = await f.client.send(message("device-1"), validateOnly: true)
        #expect(await f.emulator.received.first?.validateOnly == true)
    }

    @Test(arguments: [
        (EmulatorBehaviour.unregistered, "token"),
        (.invalidToken, "token"),
        (.senderIDMismatch, "token"),
        (.thirdPartyAuthError, "configuration"),
        (.invalidMessage, "permanent"),
        (.internalError, "retry"),
        (.unavailable(retryAfter: nil), "retry"),
    ])
    func eachErrorOfTheTableMapsToItsOutcome(behaviour: EmulatorBehaviour, expected: String) async throws {
        let f = try await fixture()
        await f.emulator.setBehaviour(behaviour, forToken: "device-1")
        let outcome = await f.client.send(message("device-1"))
        switch (outcome, expected) {
        case (.tokenInvalid, "token"), (.configurationError, "configuration"), (.permanentFailure, "permanent"),
            (.retry(after: nil, _), "retry"):
            break
        default:
            Issue.record("\(behaviour) gave \(outcome), expected \(expected)")
        }
    }

    @Test func retryAfterIsHonouredAndQuotaWaitsAtLeastAMinute() async throws {
        let f = try await fixture()
        await f.emulator.setBehaviour(.unavailable(retryAfter: 7), forToken: "a")
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: 5), forToken: "b")
        await f.emulator.setBehaviour(.quotaExceeded(retryAfter: 300), forToken: "c")
        let outcomes = await f.client.send([message("a"), message("b"), message("c"), message("d")])
        #expect(
            outcomes[0] == .retry(after: .seconds(7), reason: "503 UNAVAILABLE: The service is currently unavailable."))
        guard case .retry(after: .seconds(60)?, _) = outcomes[1] else { Issue.record("\(outcomes[1])"); return }
        guard case .retry(after: .seconds(300)?, _) = outcomes[2] else { Issue.record("\(outcomes[2])"); return }
        guard case .sent = outcomes[3] else { Issue.record("\(outcomes[3])"); return }
    }

    @Test func refusedAccessTokenIsRefreshedOnceAndTheSendRetried() async throws {
        let f = try await fixture()
        let first = await f.client.send(message("x"))
        guard case .sent = first else { Issue.record("\(first)"); return }
        await f.emulator.revokeAccessTokens()
        let outcome = await f.client.send(message("y"))
        guard case .sent = outcome else { Issue.record("\(outcome)"); return }
        // One refresh: a second token request (a third only when one timed out on a machine
        // busy with the whole suite, and was sent again), and the refused send sent once more.
        let tokenRequests = await f.emulator.tokenRequests
        #expect((2...3).contains(tokenRequests), "\(tokenRequests)")
        #expect(await f.emulator.sendRequests == 3)
    }

    @Test func emulatorRejectsMessagesFCMWouldReject() async throws {
        let f = try await fixture()
        let big = String(repeating: "x", count: 5000)
        let cases: [(FCMMessage, String)] = [
            (FCMMessage(target: .token("t"), data: [("from", "me")]), "reserved"),
            (FCMMessage(target: .token("t"), data: [("google.x", "1")]), "reserved"),
            (FCMMessage(target: .token("t"), data: [("body", big)]), "too big"),
            (FCMMessage(target: .topic("/topics/news")), "must not start with /topics/"),
            (
                FCMMessage(
                    target: .token("t"),
                    apns: .init(
                        headers: [("apns-push-type", "background"), ("apns-priority", "10")],
                        payload: .object([("aps", .object([("content-available", .int(1))]))]))),
                "apns-priority 5"
            ),
        ]
        for (message, expected) in cases {
            let outcome = await f.client.send(message)
            guard case .permanentFailure(let reason) = outcome, reason.contains(expected) else {
                Issue.record("expected a rejection mentioning \(expected), got \(outcome)")
                continue
            }
        }
        #expect(await f.emulator.received.isEmpty)
    }

    @Test func unreachableFCMIsARetry() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        let http = HTTPClient()
        let client = FCMClient(
            tokens: AccessTokenSource(account: account, http: http), http: http,
            configuration: .init(endpoint: "http://127.0.0.1:1"))
        guard case .retry(after: nil, let reason) = await client.send(message("t")) else {
            Issue.record("not a retry"); return
        }
        #expect(reason.contains("FCM unreachable"))
    }
}

@Suite struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 1_445_412_400)  // Wed, 21 Oct 2015 07:26:40 GMT

    @Test func secondsAndHTTPDatesParse() {
        #expect(HTTPResponse.parseRetryAfter("120", now: now) == .seconds(120))
        #expect(HTTPResponse.parseRetryAfter(" 0 ", now: now) == .zero)
        #expect(HTTPResponse.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == .seconds(80))
        #expect(HTTPResponse.parseRetryAfter("Wed, 21 Oct 2015 07:00:00 GMT", now: now) == .zero)
        #expect(HTTPResponse.parseRetryAfter("soon", now: now) == nil)
        #expect(HTTPResponse.parseRetryAfter("-5", now: now) == nil)
    }

    @Test func a400NamesTheTokenOnlyWhenItSaysSo() {
        func classify(_ json: String) -> PushOutcome {
            FCMErrorClassifier.classify(HTTPResponse(status: 400, body: Array(json.utf8)), now: now).outcome
        }
        let badToken =
            #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#
        let fieldViolation =
            #"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}"#
        let tooBig =
            #"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}"#
        guard case .tokenInvalid = classify(badToken) else { Issue.record("message naming the token"); return }
        guard case .tokenInvalid = classify(fieldViolation) else {
            Issue.record("field violation on message.token"); return
        }
        guard case .permanentFailure = classify(tooBig) else { Issue.record("400 without token"); return }
        // A 404 without UNREGISTERED (a wrong project) is the sender's fault.
        let notFound = FCMErrorClassifier.classify(
            HTTPResponse(
                status: 404,
                body: Array(
                    #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}"#.utf8)),
            now: now)
        guard case .configurationError = notFound.outcome else { Issue.record("\(notFound)"); return }
    }

    /// A 429 for the project's quota (Google's ErrorInfo, no FcmError) or FCM overloaded (neither)
    /// holds the whole project back for its Retry-After, a minute without one; a 429 for one
    /// target's rate (FcmError QUOTA_EXCEEDED) is that target's retry, a minute at the least.
    @Test func a429IsTheProjectsUnlessItNamesTheTargetsRate() {
        func classify(_ json: String, retryAfter: String? = nil) -> PushOutcome {
            FCMErrorClassifier.classify(
                HTTPResponse(
                    status: 429, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: Array(json.utf8)),
                now: now
            ).outcome
        }
        // As firebase/firebase-admin-go#719 quotes FCM's answer to a project over its quota.
        let project =
            #"{"error":{"code":429,"message":"Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:1'.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"quota_limit":"SendsPerMinutePerProject","quota_unit":"1/min/{project}"}}]}}"#
        let device =
            #"{"error":{"code":429,"message":"Device message rate exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#
        let overloaded = #"{"error":{"code":429,"message":"Too many requests.","status":"RESOURCE_EXHAUSTED"}}"#
        guard case .overQuota(let after, let reason) = classify(project, retryAfter: "7") else {
            Issue.record("\(classify(project))"); return
        }
        #expect(after == .seconds(7) && reason.hasPrefix("429 RESOURCE_EXHAUSTED: Quota exceeded"))
        #expect(classify(project) == .overQuota(after: .seconds(60), reason: reason))
        // Never at once (a resend without end), never for days.
        #expect(classify(project, retryAfter: "0") == .overQuota(after: .seconds(5), reason: reason))
        #expect(classify(project, retryAfter: "86400") == .overQuota(after: .seconds(3600), reason: reason))
        guard case .overQuota(after: .seconds(60), _) = classify(overloaded) else {
            Issue.record("\(classify(overloaded))"); return
        }
        guard case .retry(after: .seconds(60), let targetReason) = classify(device, retryAfter: "7") else {
            Issue.record("\(classify(device))"); return
        }
        #expect(targetReason == "429 QUOTA_EXCEEDED: Device message rate exceeded.")
    }
}
