import CCurl
import Foundation
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldHTTP

/// Requests built from what producers and devices chose: unsafe ones never reach a server, and
/// a request that may not reach private addresses is refused on the address it connects to.
@Suite struct HostileRequestTests {
    private func client(_ nginx: NginxStandIn) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        return HTTPClient(configuration: configuration)
    }

    @Test func aHeaderValueWithCRLFNeverReachesTheServerAndTheRestOfTheBatchIsSent() async throws {
        let nginx = try await NginxStandIn.start()
        let url = nginx.baseURL + "/v1/projects/p/messages:send"
        let good = HTTPRequest(url: url, headers: [("apns-collapse-id", "order-42")], body: Array("{}".utf8))
        let injected = HTTPRequest(
            url: url, headers: [("apns-collapse-id", "x\r\napns-topic: evil")], body: Array("{}".utf8))
        let results = await client(nginx).send([good, injected, good])

        #expect(results.count == 3)
        for index in [0, 2] { #expect((try? results[index].get())?.status == 200, "\(results[index])") }
        guard case .failure(let error) = results[1] else {
            Issue.record("the injected request was sent: \(results[1])")
            return
        }
        #expect(error.kind == .invalidRequest)
        #expect(error.message.contains("apns-collapse-id"), "\(error.message)")
        #expect(!error.message.contains("evil"), "the message shows the value: \(error.message)")
        #expect(try await nginx.accessLog().count == 2, "the refused request reached nginx")
    }

    @Test(arguments: [
        ("a NUL", [("x-key", "a\u{0}b")], "https://127.0.0.1/"),
        ("a bare CR", [("x-key", "a\rb")], "https://127.0.0.1/"),
        ("DEL", [("x-key", "a\u{7F}b")], "https://127.0.0.1/"),
        ("a name with a colon", [("x-key: y", "v")], "https://127.0.0.1/"),
        ("a name with CRLF", [("x\r\nevil", "v")], "https://127.0.0.1/"),
        ("an empty name", [("", "v")], "https://127.0.0.1/"),
        ("a URL with LF", [], "https://127.0.0.1/push/a\nb"),
        ("a URL with CR", [], "https://127.0.0.1/push/a\r\nHost: evil"),
        ("a file URL", [], "file:///etc/passwd"),
        ("a gopher URL", [], "gopher://127.0.0.1:70/_x"),
    ])
    func unsafeRequestsFailBeforeLibcurl(what: String, headers: [(String, String)], url: String) async throws {
        let client = HTTPClient()
        let error = await #expect(throws: HTTPClientError.self, "\(what)") {
            _ = try await client.send(HTTPRequest(url: url, headers: headers.map { (name: $0.0, value: $0.1) }))
        }
        #expect(error?.kind == .invalidRequest, "\(what): \(String(describing: error))")
        #expect(error?.curlCode == 0, "\(what) was handed to libcurl")
    }

    @Test func aTabAndNonASCIIInAValueAreFine() async throws {
        let request = HTTPRequest(url: "https://127.0.0.1/", headers: [("x-key", "a\tb é ✓")])
        #expect(request.invalidity == nil)
    }

    @Test func redirectsAreNeverFollowed() async throws {
        let hits = Atomic<Int>(0)
        let server = try await LocalServer.start { request in
            if request.path == "/elsewhere" {
                hits.add(1, ordering: .relaxed)
                return LocalServer.Response(status: 200)
            }
            return LocalServer.Response(status: 302, headers: [("Location", "/elsewhere")])
        }
        let response = try await HTTPClient().send(HTTPRequest(url: server.url("/push/1")))
        #expect(response.status == 302)
        #expect(response.header("location") == "/elsewhere")
        #expect(hits.load(ordering: .relaxed) == 0)
    }

    @Test func aRequestThatMayNotReachPrivateAddressesIsRefusedAndTheServerSeesNothing() async throws {
        let nginx = try await NginxStandIn.start()
        let client = client(nginx)
        // localhost is the DNS case: the name is fine, the address it resolves to is not.
        for base in [nginx.baseURL, "https://localhost:\(nginx.port)"] {
            let error = await #expect(throws: HTTPClientError.self, "\(base)") {
                _ = try await client.send(HTTPRequest(url: base + "/push/1", allowPrivateAddresses: false))
            }
            #expect(error?.kind == .refusedAddress, "\(base): \(String(describing: error))")
            #expect(error?.message.contains("loopback") == true, "\(String(describing: error))")
        }
        #expect(try await nginx.accessLog().isEmpty, "a refused request reached nginx")

        // Allowed, the same requests are sent; and a refused one in a batch fails alone.
        let results = await client.send([
            HTTPRequest(url: "https://localhost:\(nginx.port)/push/1"),
            HTTPRequest(url: nginx.baseURL + "/push/2", allowPrivateAddresses: false),
            HTTPRequest(url: nginx.baseURL + "/push/3"),
        ])
        #expect((try? results[0].get())?.status == 201, "\(results[0])")
        #expect((try? results[2].get())?.status == 201, "\(results[2])")
        if case .failure(let error) = results[1] {
            #expect(error.kind == .refusedAddress)
        } else {
            Issue.record("sent to a loopback address: \(results[1])")
        }
        #expect(try await nginx.accessLog().count == 2)
    }

    /// Plain http goes through libcurl, whose open-socket callback makes the same check (as it
    /// does behind an egress proxy, and for a server without HTTP/2).
    @Test func libcurlRefusesAPrivateAddressToo() async throws {
        let seen = Mutex(0)
        let server = try await LocalServer.start { _ in
            seen.withLock { $0 += 1 }
            return LocalServer.Response(status: 200)
        }
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await HTTPClient().send(HTTPRequest(url: server.url("/push/1"), allowPrivateAddresses: false))
        }
        #expect(error?.kind == .refusedAddress)
        #expect(error?.curlCode != 0, "libcurl made the check: \(String(describing: error))")
        #expect(seen.withLock { $0 } == 0, "a refused request reached the server")
    }

    /// A trusted request's connection to 127.0.0.1 stays open; a restricted request to the same
    /// host and port must not ride on it.
    @Test func aConnectionOpenedForATrustedRequestIsNotReusedForARestrictedOne() async throws {
        let nginx = try await NginxStandIn.start()
        let client = client(nginx)
        #expect(
            try await client.send(HTTPRequest(url: nginx.baseURL + "/push/1")).status == 201,
            "the stand-in answers as a push service does")
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(url: nginx.baseURL + "/push/2", allowPrivateAddresses: false))
        }
        #expect(error?.kind == .refusedAddress)
        #expect(try await nginx.accessLog().count == 1)
    }

    @Test(arguments: [
        ("8.8.8.8", "public"), ("2001:4860:4860::8888", "public"), ("172.32.0.1", "public"),
        ("100.128.0.1", "public"), ("192.169.0.1", "public"),
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"),
        ("192.168.1.1", "private"), ("fc00::1", "private"), ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"), ("::ffff:192.168.0.1", "private"),
        ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("febf::1", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("::", "unspecified"),
        ("100.64.0.1", "shared"), ("100.127.255.255", "shared"),
        ("224.0.0.1", "multicast"), ("239.1.1.1", "multicast"), ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"), ("240.0.0.1", "reserved"),
    ])
    func addressesAreClassified(address: String, kind: String) {
        #expect(addressKind(address) == kind, "\(address)")
    }

    /// Addresses that carry a private one inside (NAT64, 6to4) are judged as what they carry;
    /// reserved ranges are not public.
    @Test func addressesAreClassifiedByWhatTheyReach() {
        func v6(_ text: String) -> Int32 {
            var bytes = [UInt8](repeating: 0, count: 16)
            #expect(inet_pton(AF_INET6, text, &bytes) == 1, "\(text)")
            return herald_classify_ipv6(bytes)
        }
        func v4(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> Int32 {
            herald_classify_ipv4(a << 24 | b << 16 | c << 8 | d)
        }
        let publicKind = Int32(HERALD_ADDRESS_PUBLIC)
        for blocked in [
            v6("64:ff9b::a9fe:a9fe"), v6("64:ff9b::7f00:1"), v6("2002:a00:1::"), v6("100::1"), v6("::ffff:10.0.0.1"),
            v6("::1"), v6("fe80::1"), v6("fd00::1"), v4(127, 0, 0, 1), v4(169, 254, 169, 254), v4(192, 0, 0, 8),
            v4(198, 19, 1, 1), v4(100, 64, 0, 1), v6("64:ff9b:1::a9fe:a9fe"), v6("::ffff:0:a9fe:a9fe"),
            v6("::ffff:0:7f00:1"), v6("64:ff9b:1:0:a:0:100:0"), v6("2001::1"), v6("2001:db8::1"), v4(192, 0, 2, 1),
            v4(198, 51, 100, 7),
            v4(203, 0, 113, 9),
        ] {
            #expect(blocked != publicKind)
        }
        for open in [
            v6("2a00:1450:4001::200e"), v6("64:ff9b::808:808"), v6("64:ff9b:1::808:808"), v6("2001:4860::8888"),
            v4(8, 8, 8, 8), v4(198, 20, 0, 1), v4(203, 0, 114, 1),
        ] {
            #expect(open == publicKind)
        }
    }
}
