import CHTTP2
import Foundation
import HeraldHTTP
import HeraldTestSupport
import Synchronization
import Testing

/// What the HTTP/2 engine (nghttp2 over OpenSSL) does beside libcurl's work: a server without
/// HTTP/2, client certificates, host names checked against the certificate, a name resolved and
/// a certificate read on a thread of its own. The rest of its behaviour is the client's, proven in the other suites.
@Suite struct HTTP2EngineTests {
    private let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "herald-h2-\(UUID().uuidString)")

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    private func client(trusting nginx: NginxStandIn) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        configuration.threads = 1
        return HTTPClient(configuration: configuration)
    }

    private func request(_ url: String, certificate: ClientCertificate? = nil) -> HTTPRequest {
        HTTPRequest(
            url: url + "/v1/projects/p/messages:send", headers: [("Content-Type", "application/json")],
            body: Array("{}".utf8), clientCertificate: certificate)
    }

    @Test func aServerWithoutHTTP2IsSentHTTP11OverTLSAndNothingIsLost() async throws {
        let nginx = try await NginxStandIn.start(http2: false)
        let client = client(trusting: nginx)
        let first = await client.send(Array(repeating: request(nginx.baseURL), count: 20))
        let later = try await client.send(request(nginx.baseURL))
        let responses = try first.map { try $0.get() } + [later]
        #expect(responses.allSatisfy { $0.status == 200 && $0.httpVersion == 1 })
        let log = try await nginx.accessLog()
        #expect(log.count == 21, "each request reached the server once")
        #expect(log.allSatisfy { $0.protocolName == "HTTP/1.1" })
    }

    /// A server may answer with anything (a Web Push endpoint is anyone's): a body beyond 1 MiB
    /// resets that stream alone, and the connection goes on serving the next request.
    @Test func anOversizedAnswerFailsAloneAndItsConnectionGoesOn() async throws {
        let nginx = try await NginxStandIn.start()
        let client = client(trusting: nginx)
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(HTTPRequest(method: "GET", url: nginx.baseURL + "/big"))
        }
        #expect(error?.kind == .serverMisbehaved)
        #expect(error?.message.contains("exceeds 1 MiB") == true, "\(error?.message ?? "")")
        let next = try await client.send(request(nginx.baseURL))
        #expect(next.status == 200 && next.newConnections == 0, "the same connection")
    }

    @Test func aHostNameIsResolvedAndCheckedAgainstTheCertificate() async throws {
        let nginx = try await NginxStandIn.start()
        let client = client(trusting: nginx)
        // The certificate names localhost and 127.0.0.1.
        let byName = try await client.send(request("https://localhost:\(nginx.port)"))
        #expect(byName.status == 200 && byName.httpVersion == 2)
        // The same server by an address its certificate does not name.
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(request("https://[::ffff:127.0.0.1]:\(nginx.port)"))
        }
        #expect(error?.kind == .connection)
        #expect(error?.curlCode == 0, "the engine, not libcurl, refused it")
        #expect(error?.message.contains("certificate") == true, "\(error?.message ?? "")")
        #expect(try await nginx.accessLog().count == 1, "the mismatched server was sent nothing")
    }

    @Test func clientCertificatesArePresentedInPEMAndPKCS12() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=Test CA", "-keyout", path("ca-key.pem"), "-out", path("ca.pem"),
        ])
        try await openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=com.example.app",
            "-keyout", path("client-key.pem"), "-out", path("client.csr"),
        ])
        try await openssl([
            "x509", "-req", "-in", path("client.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca-key.pem"),
            "-CAcreateserial", "-days", "2", "-out", path("client-cert.pem"),
        ])
        let pem =
            try String(contentsOfFile: path("client-cert.pem"), encoding: .utf8)
            + String(contentsOfFile: path("client-key.pem"), encoding: .utf8)
        try pem.write(toFile: path("client.pem"), atomically: true, encoding: .utf8)
        try await openssl([
            "pkcs12", "-export", "-in", path("client-cert.pem"), "-inkey", path("client-key.pem"), "-passout",
            "pass:s3cret", "-out", path("client.p12"),
        ])

        let nginx = try await NginxStandIn.start(clientCA: path("ca.pem"))
        let client = client(trusting: nginx)
        let pemResponse = try await client.send(
            request(nginx.baseURL, certificate: ClientCertificate(file: path("client.pem"), format: .pem)))
        let p12Response = try await client.send(
            request(
                nginx.baseURL,
                certificate: ClientCertificate(file: path("client.p12"), format: .p12, password: "s3cret")
            ))
        let anonymous = try await client.send(request(nginx.baseURL))
        #expect([pemResponse, p12Response, anonymous].allSatisfy { $0.status == 200 })
        #expect(try await nginx.clientVerdicts() == ["SUCCESS", "SUCCESS", "NONE"])

        let wrongPassword = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(
                request(
                    nginx.baseURL,
                    certificate: ClientCertificate(file: path("client.p12"), format: .p12, password: "wrong")))
        }
        #expect(wrongPassword?.message.contains("client.p12") == true, "\(wrongPassword?.message ?? "")")
        #expect(wrongPassword?.curlCode == 0, "the engine, not libcurl, read the certificate")
        #expect(try await nginx.accessLog().count == 3, "a request whose certificate failed was sent nothing")
    }

    /// A certificate renewed in place (an APNs push certificate replaced in its file) is read
    /// again for the next connection: here nginx ends each connection after one request, and
    /// the file, once broken, fails the next request instead of the old certificate going on.
    @Test func aCertificateRenewedInPlaceIsReadAgainForTheNextConnection() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=com.example.app", "-keyout", path("key.pem"), "-out", path("cert.pem"),
        ])
        let pem =
            try String(contentsOfFile: path("cert.pem"), encoding: .utf8)
            + String(contentsOfFile: path("key.pem"), encoding: .utf8)
        try pem.write(toFile: path("client.pem"), atomically: false, encoding: .utf8)
        let nginx = try await NginxStandIn.start(requestsPerConnection: 1, clientCA: path("cert.pem"))
        let client = client(trusting: nginx)
        let certificate = ClientCertificate(file: path("client.pem"), format: .pem)
        #expect(try await client.send(request(nginx.baseURL, certificate: certificate)).status == 200)

        try Data("not a certificate any more".utf8).write(to: URL(fileURLWithPath: path("client.pem")))
        let error = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(request(nginx.baseURL, certificate: certificate))
        }
        #expect(error?.message.contains("client.pem") == true, "\(error?.message ?? "")")
        #expect(try await nginx.clientVerdicts() == ["SUCCESS"])
    }

    /// A certificate file is read on a thread of its own, never on the loop that carries every
    /// other origin's requests: a file that blocks its reader (a FIFO no one writes to, a hung
    /// network mount) holds up its own origin's connection until the connect timeout, and
    /// nothing else. And one read at a time: while it blocks, the origin's next connection fails
    /// at once, saying so, rather than leaving another thread stuck. Before, the loop itself
    /// waited in the read.
    @Test func aCertificateFileThatBlocksHoldsUpOnlyItsOwnOrigin() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = path("client.pem")
        try #require(mkfifo(fifo, 0o600) == 0)
        let nginx = try await NginxStandIn.start()
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = nginx.caBundle
        configuration.threads = 1
        configuration.connectTimeout = .seconds(3)
        let client = HTTPClient(configuration: configuration)
        let certificate = ClientCertificate(file: fifo, format: .pem)
        let blocked = Task { [request = request(nginx.baseURL, certificate: certificate)] in
            await client.send([request])[0]
        }
        // A FIFO's writing end opens only while a reader waits in its open; held open without a
        // byte, it keeps the reader waiting in its read. Closing it ends the read.
        var writer: Int32 = -1
        for _ in 0..<1000 where writer < 0 {
            writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer < 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        try #require(writer >= 0, "the certificate was never read")
        let reading = OnceClosed(writer)
        defer { reading.end() }
        // Whatever happens, the read ends after 20 s: a loop stuck in it would otherwise hold
        // the test for good.
        let released = Mutex(false)
        let releaser = Task.detached {
            guard (try? await Task.sleep(for: .seconds(20))) != nil else { return }  // cancelled
            released.withLock { $0 = true }
            reading.end()
        }
        defer { releaser.cancel() }

        let healthy = try await client.send(request(nginx.baseURL))
        #expect(healthy.status == 200)
        #expect(!released.withLock { $0 }, "the other origin's request waited for the certificate's read")
        guard case .failure(let error) = await blocked.value else {
            Issue.record("a request whose certificate never came was answered")
            return
        }
        #expect(error.message.contains("timed out after 3000 ms"), "\(error.message)")
        let next = await #expect(throws: HTTPClientError.self) {
            _ = try await client.send(self.request(nginx.baseURL, certificate: certificate))
        }
        #expect(next?.message.contains("is still being read") == true, "\(next?.message ?? "")")
    }

    private func openssl(_ arguments: [String]) async throws {
        let result = try await runProgram("/usr/bin/openssl", arguments)
        try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")): \(result.output)")
    }
}

/// A descriptor closed once, by whichever of its owners comes first: a second close could take
/// a descriptor that another test running beside this one has since been given.
private final class OnceClosed: Sendable {
    private let descriptor: Mutex<Int32>

    init(_ descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    func end() {
        descriptor.withLock {
            if $0 >= 0 { close($0) }
            $0 = -1
        }
    }
}

/// The engine's C interface, called as HeraldHTTP calls it: what it reads of a request stays within
/// the lengths it is given.
@Suite struct HTTP2EngineInterfaceTests {
    /// Results of the requests submitted, by the number passed as their context.
    static let results = Mutex<[Int: (herald_h2_outcome, String)]>([:])

    @Test func headerFieldsAreReadWithinTheirLengthWhateverTheirCount() throws {
        var error = [CChar](repeating: 0, count: 256)
        var configuration = herald_h2_config(
            max_connections_per_origin: 1, max_connections: 1, max_streams: 1, connect_timeout_ms: 1000,
            stall_timeout_ms: 0, ca_file: nil)
        let engine = try #require(
            herald_h2_new(
                &configuration,
                { context, result in
                    guard let result = result?.pointee else { return }
                    let message = result.message.map { String(cString: $0) } ?? ""
                    HTTP2EngineInterfaceTests.results.withLock {
                        $0[Int(bitPattern: context)] = (result.outcome, message)
                    }
                }, &error, error.count))
        defer { herald_h2_free(engine) }
        // Two fields' worth of bytes, said to hold three.
        let fields: [CChar] = Array("content-type\0a\0ttl\060\0".utf8CString.dropLast()).map { CChar($0) }
        fields.withUnsafeBufferPointer { fields in
            herald_h2_submit(
                engine, "https://127.0.0.1:9/x", "POST", fields.baseAddress, fields.count, 3, nil, 0, 1000, nil, 0, nil,
                0,
                UnsafeMutableRawPointer(bitPattern: 7))
        }
        let result = try #require(Self.results.withLock { $0[7] })
        #expect(result.0 == HERALD_H2_OTHER)
        #expect(result.1 == "the request's header fields are malformed")
    }
}
