import Foundation
import HeraldHTTP
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct HTTPClientTests {
    @Test func requestsAreMultiplexedAsHTTP2StreamsOverFewConnections() async throws {
        let nginx = try await NginxStandIn.start()
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        configuration.maxConnectionsPerHost = 2
        let client = HTTPClient(configuration: configuration)
        let request = HTTPRequest(
            url: nginx.baseURL + "/v1/projects/p/messages:send",
            headers: [("content-type", "application/json"), ("authorization", "Bearer x")],
            body: Array(#"{"message":{"token":"t"}}"#.utf8))

        let responses = try await withThrowingTaskGroup(of: HTTPResponse.self) { group in
            for _ in 0..<1000 { group.addTask { try await client.send(request) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(responses.count == 1000)
        #expect(responses.allSatisfy { $0.status == 200 && $0.httpVersion == 2 })
        #expect(responses.allSatisfy { $0.bodyText.contains("projects/standin/messages/") })
        #expect(responses[0].header("Content-Type") == "application/json")
        let opened = responses.map(\.newConnections).reduce(0, +)
        #expect(opened >= 1 && opened <= 2, "opened \(opened) connections")

        let log = try await nginx.accessLog()
        #expect(log.count == 1000)
        #expect(log.allSatisfy { $0.protocolName == "HTTP/2.0" })
        #expect(Set(log.map(\.connection)).count <= 2)
        #expect((log.map(\.request).max() ?? 0) >= 500, "each connection carried many streams")
    }

    /// Google's front ends end HTTP/2 connections with a GOAWAY from time to time. Streams the
    /// server had not taken are retried on a new connection (libcurl does this): none fails,
    /// and none reaches the server twice.
    @Test func connectionsEndedByGOAWAYLoseNoRequest() async throws {
        let nginx = try await NginxStandIn.start(requestsPerConnection: 500)
        let (outcomes, log) = try await sendConcurrently(2000, to: nginx)
        #expect(outcomes.filter { $0 != .success(200) }.isEmpty, "\(outcomes.filter { $0 != .success(200) })")
        #expect(log.count == 2000)
        #expect((log.map(\.request).max() ?? 0) <= 500)
        #expect(Set(log.map(\.connection)).count >= 4, "nginx ended each connection after 500 requests")
    }

    /// A server that ends connections far more often than FCM does, with a thousand streams
    /// waiting: a stream refused five times in a row fails as a connection error, which the
    /// dispatch worker retries with backoff. Such a request never reached the server.
    @Test func streamsRefusedTooOftenFailAsRetryableAndWereNeverProcessed() async throws {
        let nginx = try await NginxStandIn.start(requestsPerConnection: 50)
        let (outcomes, log) = try await sendConcurrently(2000, to: nginx)
        let failures = outcomes.filter { $0 != .success(200) }
        #expect(failures.allSatisfy { $0 == .failure(.connection) }, "\(failures)")
        #expect(log.count == 2000 - failures.count, "a failed request reached the server")
    }

    enum Outcome: Equatable {
        case success(Int)
        case failure(HTTPClientError.Kind)
    }

    /// Sends `count` FCM-like requests at once over at most two connections; returns each
    /// request's outcome and nginx's access log.
    private func sendConcurrently(_ count: Int, to nginx: NginxStandIn) async throws -> (
        [Outcome], [(connection: Int, request: Int, protocolName: String)]
    ) {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        configuration.maxConnectionsPerHost = 2
        let client = HTTPClient(configuration: configuration)
        let request = HTTPRequest(
            url: nginx.baseURL + "/v1/projects/p/messages:send", headers: [("content-type", "application/json")],
            body: Array(#"{"message":{"token":"t"}}"#.utf8))
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for _ in 0..<count {
                group.addTask {
                    do { return .success(try await client.send(request).status) } catch let error as HTTPClientError {
                        return .failure(error.kind)
                    } catch { return .failure(.connection) }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        return (outcomes, try await nginx.accessLog())
    }

    @Test func untrustedCertificateIsAConnectionError() async throws {
        let nginx = try await NginxStandIn.start()
        let client = HTTPClient()
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(url: nginx.baseURL + "/"))
        }
        #expect(error?.kind == .connection)
    }

    @Test func statusHeadersAndBodyRoundTripOverHTTP1() async throws {
        let server = try await LocalServer.start { request in
            LocalServer.Response(
                status: 503, headers: [("Retry-After", "7"), ("X-Echo-Auth", request.header("authorization") ?? "")],
                body: request.body)
        }
        let client = HTTPClient()
        let response = try await client.send(
            HTTPRequest(url: server.url("/echo"), headers: [("Authorization", "Bearer abc")], body: Array("héllo".utf8))
        )
        #expect(response.status == 503)
        #expect(response.httpVersion == 1)
        #expect(response.header("retry-after") == "7")
        #expect(response.header("x-echo-auth") == "Bearer abc")
        #expect(response.bodyText == "héllo")
    }

    /// libcurl's path (plain http, a server without HTTP/2, an egress proxy) keeps no more of a
    /// response than the HTTP/2 engine does: a distributor or stand-in that answers with
    /// megabytes fails its own request, and the next one is answered.
    @Test func aResponseOverItsCapFailsOverHTTP1AndKeepsNoMore() async throws {
        let server = try await LocalServer.start { request in
            switch request.path {
            case "/body": LocalServer.Response(status: 200, body: Data(count: 3 << 20))
            case "/headers":
                LocalServer.Response(
                    status: 200, headers: (0..<80).map { ("X-Filler-\($0)", String(repeating: "a", count: 1000)) })
            default: LocalServer.Response(status: 200, body: Data("small".utf8))
            }
        }
        let client = HTTPClient()
        for (path, words) in [
            ("/body", "the response's body exceeds 1 MiB"), ("/headers", "the response's header fields exceed 64 KiB"),
        ] {
            let result = await client.send([HTTPRequest(url: server.url(path))])[0]
            guard case .failure(let error) = result else {
                Issue.record("\(path): answered \(result)")
                continue
            }
            #expect(error.kind == .serverMisbehaved, "\(path): \(error)")
            #expect(error.message == words, "\(path): \(error)")
        }
        let small = try await client.send(HTTPRequest(url: server.url("/small")))
        #expect(small.status == 200 && small.httpVersion == 1 && small.bodyText == "small")
    }

    @Test func aHeaderIsFoundByItsWholeNameInAnyCase() {
        let response = HTTPResponse(
            status: 200,
            headers: [
                ("APNS-ID-Extra", "not this one"), ("apns-id", "  \tfirst\t "), ("Apns-Id", "second"),
                ("apns-unique-id", ""), ("location", "https://push.example/m/1?a=b:c"),
            ])
        #expect(response.header("apns-id") == "first", "the first of two, its surrounding spaces and tabs gone")
        #expect(response.header("APNS-ID") == "first")
        #expect(response.header("apns-id-extra") == "not this one")
        #expect(response.header("apns-unique-id") == "", "present and empty is not absent")
        #expect(response.header("location") == "https://push.example/m/1?a=b:c", "a colon in the value stays")
        #expect(response.header("apns") == nil, "a name's prefix is not the name")
        #expect(response.header("retry-after") == nil)
        #expect(HTTPResponse(status: 204).header("apns-id") == nil)
    }

    @Test func anOriginIsTheSchemeHostAndPort() {
        let cases = [
            "https://fcm.googleapis.com/v1/projects/p/messages:send": "https://fcm.googleapis.com",
            "https://127.0.0.1:8443/push/1?x=https://other": "https://127.0.0.1:8443",
            "https://[2001:db8::1]:443#part": "https://[2001:db8::1]:443",
            "https://push.example?token=a/b": "https://push.example",
            "http://h": "http://h",
            "not a url": "not a url",
        ]
        for (url, origin) in cases { #expect(HTTPRequest.origin(of: url) == origin, "\(url)") }
    }

    @Test func slowServerTimesOut() async throws {
        let server = try await LocalServer.start { _ in
            try await Task.sleep(for: .seconds(30))
            return LocalServer.Response(status: 200)
        }
        let client = HTTPClient()
        let started = ContinuousClock.now
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(url: server.url("/slow"), timeout: .milliseconds(300)))
        }
        #expect(error?.kind == .timeout)
        // Before the server would answer, at 30 s (generous: the test machine may be busy).
        #expect(ContinuousClock.now - started < .seconds(25))
    }

    @Test func refusedConnectionIsAConnectionError() async throws {
        let client = HTTPClient()
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(url: "http://127.0.0.1:1/"))
        }
        #expect(error?.kind == .connection)
    }

    @Test func shutdownFailsLaterRequests() async throws {
        let client = HTTPClient()
        client.shutdown()
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(url: "http://127.0.0.1:1/"))
        }
        #expect(error?.kind == .shutdown)
    }
}

/// A server that stops answering holds back only its own requests.
@Suite struct OriginIsolationTests {
    @Test func requestsToAStuckServerDoNotQueueAnotherServersRequests() async throws {
        let nginx = try await NginxStandIn.start()
        let hole = try BlackHole()
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        // Room for 2 transfers per origin: the stuck server's 3 requests fill its own, and 1
        // waits. With one queue for all origins, the healthy request would wait behind them
        // until the first two timed out (2 minutes); per origin, it goes at once. Once it is
        // answered, the stuck server stops listening and its requests fail.
        configuration.maxConnectionsPerHost = 1
        configuration.maxConcurrentStreams = 2
        configuration.threads = 1
        // The stuck server's handshakes never end: they must not give up (10 s by default)
        // before the healthy answer, which a loaded machine took over 10 s to give in CI.
        configuration.connectTimeout = .seconds(120)
        let client = HTTPClient(configuration: configuration)
        let order = Arrivals()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    _ = try? await client.send(HTTPRequest(url: hole.baseURL + "/push", timeout: .seconds(120)))
                    order.append("stuck")
                }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(200))
                let response = try? await client.send(
                    HTTPRequest(url: nginx.baseURL + "/v1/projects/p/messages:send", body: Array("{}".utf8)))
                order.append(response?.status == 200 ? "healthy" : "healthy failed")
                hole.shutDown()
            }
        }
        let seen = order.seen
        #expect(seen.first == "healthy", "\(seen)")
        #expect(seen.filter { $0 == "stuck" }.count == 3)
    }
}

/// What completed, in order.
private final class Arrivals: Sendable {
    private let list = Mutex<[String]>([])
    func append(_ name: String) { list.withLock { $0.append(name) } }
    var seen: [String] { list.withLock { $0 } }
}
