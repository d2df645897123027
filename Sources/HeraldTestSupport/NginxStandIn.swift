import Foundation

/// nginx standing in for FCM over TLS and HTTP/2, or the TLS and HTTP/2 front of an emulator
/// (`scripts/lib/nginx-standin.sh`).
public final class NginxStandIn: Sendable {
    public let directory: URL
    public let port: Int
    /// The self-signed certificate to trust.
    public var caBundle: String { directory.appendingPathComponent("cert.pem").path }
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    /// Starts one. With `requestsPerConnection`, nginx ends each connection with a GOAWAY after
    /// that many requests; without it, connections last the whole test. With `upstream`, every
    /// request is passed on to that port on 127.0.0.1 (an emulator); with `clientCA` too, client
    /// certificates it signed are verified, and the verdict passed on in `X-Client-Verify` (and
    /// written in the access log). With `http2` false, it offers HTTP/1.1 only.
    /// Starting (a key, a certificate, nginx) blocks, so it runs on a thread of its own, never on
    /// the two threads every test shares.
    public static func start(
        requestsPerConnection: Int? = nil, upstream: UInt16? = nil, clientCA: String? = nil, http2: Bool = true
    ) async throws -> NginxStandIn {
        try await onOwnThread {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "herald-nginx-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let output = try script(
                [
                    "start", directory.path, "\(requestsPerConnection ?? 10_000_000)", upstream.map { "\($0)" } ?? "",
                    clientCA ?? "", http2 ? "" : "http/1.1",
                ])
            guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CocoaError(
                    .executableLoad, userInfo: [NSLocalizedDescriptionKey: "nginx stand-in did not start: \(output)"])
            }
            return NginxStandIn(directory: directory, port: port)
        }
    }

    private init(directory: URL, port: Int) {
        self.directory = directory
        self.port = port
    }

    deinit {
        // Stopping waits for nginx to exit: not on the threads the tests share either.
        let directory = directory
        Thread {
            _ = try? Self.script(["stop", directory.path])
            try? FileManager.default.removeItem(at: directory)
        }.start()
    }

    /// The access log's lines as (connection serial, request number on it, protocol).
    public func accessLog() async throws -> [(connection: Int, request: Int, protocolName: String)] {
        try await accessLogLines().compactMap { fields in
            guard fields.count >= 3, let connection = Int(fields[0]), let request = Int(fields[1]) else { return nil }
            return (connection, request, String(fields[2]))
        }
    }

    /// Each request's client certificate verdict, as nginx judged it: SUCCESS, FAILED:… or NONE.
    public func clientVerdicts() async throws -> [String] {
        try await accessLogLines().compactMap { $0.count >= 7 ? String($0[6]) : nil }
    }

    private func accessLogLines() async throws -> [[Substring]] {
        // nginx buffers the log for up to 100 ms.
        try await Task.sleep(for: .milliseconds(300))
        let text = try String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)
        return text.split(separator: "\n").map { $0.split(separator: " ") }
    }

    private static func script(_ arguments: [String]) throws -> String {
        try runLibraryScript("nginx-standin.sh", arguments)
    }
}
