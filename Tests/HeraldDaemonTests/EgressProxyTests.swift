import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// FCM and token requests go through an egress proxy given by `HTTPS_PROXY`, and straight to
/// hosts named in `NO_PROXY`. The client runs in a child process (`herald-bench http`), so the
/// variables never reach the other tests.
@Suite struct EgressProxyTests {
    @Test func requestsTunnelThroughHTTPSProxyUnlessTheHostIsInNoProxy() async throws {
        let nginx = try await NginxStandIn.start()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("proxy-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let proxy = try await ConnectProxy.start(log: log.path)
        defer { proxy.stop() }
        func send(_ environment: [String: String]) async throws -> String {
            let run = try await HeraldProcess.run(
                [
                    "http", "--url", nginx.baseURL + "/v1/projects/p/messages:send", "--ca-bundle",
                    nginx.caBundle, "--requests", "200", "--concurrency", "50", "--connections", "2",
                ], environment: environment, executable: "herald-bench")
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.contains("(200 ok, 0 failed)"), "\(run.output)")
            return (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        }

        let proxied = try await send(["HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)"])
        let tunnels = proxied.split(separator: "\n")
        #expect(!tunnels.isEmpty && tunnels.count <= 2, "\(proxied)")
        #expect(tunnels.allSatisfy { $0 == "CONNECT 127.0.0.1:\(nginx.port)" }, "\(proxied)")

        let bypassed = try await send(["HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)", "NO_PROXY": "127.0.0.1"])
        #expect(bypassed == proxied, "a host in NO_PROXY went through the proxy")
    }
}

/// `scripts/lib/connect-proxy.py`, a minimal HTTP CONNECT proxy that logs each tunnel.
struct ConnectProxy {
    let process: ChildProcess
    let port: Int

    static func start(log: String) async throws -> ConnectProxy {
        let output = Pipe()
        let process = try ChildProcess(
            "/usr/bin/python3", [packageRoot.appendingPathComponent("scripts/lib/connect-proxy.py").path, log],
            standardOutput: output.fileHandleForWriting.fileDescriptor)
        try output.fileHandleForWriting.close()
        // The first line it prints is its port.
        let line = try await onOwnThread { () -> String in
            var bytes: [UInt8] = []
            while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let port = Int(line) else {
            process.send(SIGKILL)
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "proxy did not start: \(line)"])
        }
        return ConnectProxy(process: process, port: port)
    }

    func stop() { process.send(SIGKILL) }
}
