import Foundation
import HeraldFCM
import HeraldHTTP
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct EmulatorExecutableTests {
    @Test func theEmulatorBinaryIssuesTokensAndAcceptsMessages() async throws {
        let accountFile = FileManager.default.temporaryDirectory.appendingPathComponent("sa-\(UUID().uuidString).json")
            .path
        defer { try? FileManager.default.removeItem(atPath: accountFile) }
        let emulator = try HeraldProcess(
            ["--port", "0", "--write-service-account", accountFile, "--project", "smoke"],
            executable: "herald-emulator")
        defer { emulator.send(SIGTERM) }
        #expect(
            try await eventually { emulator.output.contains("listening on http://127.0.0.1:") }, "\(emulator.output)")
        let base = try #require(emulator.output.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.1)
        #expect(try FileManager.default.attributesOfItem(atPath: accountFile)[.posixPermissions] as? Int == 0o600)

        let account = try ServiceAccount.load(file: accountFile)
        #expect(account.tokenURI == "\(base)/token")
        let http = HTTPClient()
        let client = FCMClient(
            tokens: AccessTokenSource(account: account, http: http), http: http,
            configuration: .init(endpoint: String(base)))
        let outcome = await client.send(FCMMessage(target: .token("device"), data: [("k", "v")]))
        #expect(outcome == .sent(messageName: "projects/smoke/messages/1"))
        let listed = try await http.send(HTTPRequest(method: "GET", url: "\(base)/emulator/messages"))
        #expect(listed.bodyText.contains(#""token":"device""#))
    }
}
