import Foundation
import HeraldTestSupport
import Testing

/// `herald vapid-key`: the key pair an app needs for Web Push.
@Suite struct VAPIDKeyCommandTests {
    @Test func makesAPrivateKeyFileAndPrintsThePublicKeyOpenSSLDerives() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-vapid-cmd-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("shop-vapid.pem").path

        let made = try await HeraldProcess.run(["vapid-key", file])
        #expect(made.status == 0, "\(made.output)")
        let publicKey = made.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(publicKey.count == 87, "65 bytes in base64url: \(publicKey)")
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        // openssl reads the file and derives the same uncompressed point.
        let der = directory.appendingPathComponent("public.der").path
        let derived = try await runProgram(
            "/usr/bin/openssl",
            ["ec", "-in", file, "-pubout", "-conv_form", "uncompressed", "-outform", "DER", "-out", der])
        #expect(derived.status == 0, "\(derived.output)")
        let point = [UInt8](try Data(contentsOf: URL(fileURLWithPath: der))).suffix(65)
        let encoded = Data(point).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(encoded == publicKey)

        #expect(try await HeraldProcess.run(["vapid-key", "--show", file]).output.contains(publicKey))
        // A second key would orphan every subscription made with the first: refused.
        let again = try await HeraldProcess.run(["vapid-key", file])
        #expect(again.status != 0)
        #expect(again.output.contains("exists"))
    }
}
