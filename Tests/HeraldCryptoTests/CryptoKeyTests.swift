import Foundation
import HeraldCrypto
import HeraldFCM
import HeraldTestSupport
import Testing

/// Signatures checked by the `openssl` command line, against keys generated at run time.
/// A class, so that each test's key directory is removed when the test ends.
@Suite final class CryptoKeyTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    @discardableResult
    func openssl(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await runProgram("/usr/bin/openssl", arguments)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @Test(arguments: ["pkcs8", "pkcs1"])
    func rs256SignatureVerifiesWithOpenSSL(format: String) async throws {
        try await openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("key.pem")])
        if format == "pkcs1" {
            // The traditional PKCS#1 form ("RSA PRIVATE KEY").
            try await openssl(["rsa", "-in", path("key.pem"), "-traditional", "-out", path("key.pem")])
        }
        try await openssl(["pkey", "-in", path("key.pem"), "-pubout", "-out", path("public.pem")])
        let pem = try String(contentsOfFile: path("key.pem"), encoding: .utf8)
        // Assembled so that no tracked file holds a literal PEM key header.
        let label = (format == "pkcs1" ? "RSA " : "") + "PRIVATE" + " KEY"
        #expect(pem.contains("BEGIN " + label))

        let key = try CryptoKey(privateKeyPEM: pem)
        #expect(key.kind == .rsa)
        let data = Array("header.claims with unicode ✓".utf8)
        let signature = try key.signRS256(data)
        #expect(signature.count == 256)
        try Data(data).write(to: URL(fileURLWithPath: path("data")))
        try Data(signature).write(to: URL(fileURLWithPath: path("signature")))
        let verified = try await openssl([
            "dgst", "-sha256", "-verify", path("public.pem"), "-signature", path("signature"), path("data"),
        ])
        #expect(verified.status == 0, "\(verified.output)")
        #expect(verified.output.contains("Verified OK"))

        // A changed message fails, so the check above can fail.
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: path("data")))
        #expect(
            try await openssl([
                "dgst", "-sha256", "-verify", path("public.pem"), "-signature", path("signature"), path("data"),
            ]).status != 0)
        // And the shim's own verification agrees.
        #expect(try CryptoKey(publicKeyPEM: key.publicKeyPEM()).verifyRS256(data, signature: signature))
        #expect(
            try !CryptoKey(publicKeyPEM: key.publicKeyPEM()).verifyRS256(Array("other".utf8), signature: signature))
    }

    /// PS256 as JWS defines it (RFC 7518 §3.5): PSS over SHA-256, MGF1 over SHA-256, a 32-byte
    /// salt. openssl checks ours with exactly those settings, and ours checks openssl's.
    @Test func ps256SignatureVerifiesWithOpenSSLBothWays() async throws {
        try await openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("key.pem")])
        try await openssl(["pkey", "-in", path("key.pem"), "-pubout", "-out", path("public.pem")])
        let key = try CryptoKey(privateKeyPEM: try String(contentsOfFile: path("key.pem"), encoding: .utf8))
        let data = Array("harmony.jwt".utf8)
        let pss = [
            "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32", "-sigopt", "rsa_mgf1_md:sha256",
        ]
        try Data(data).write(to: URL(fileURLWithPath: path("data")))

        let signature = try key.signPS256(data)
        #expect(signature.count == 256)
        // PSS is randomized: two signatures of the same input differ, and both verify.
        #expect(try key.signPS256(data) != signature)
        try Data(signature).write(to: URL(fileURLWithPath: path("signature")))
        let verified = try await openssl(
            ["dgst", "-sha256"] + pss + ["-verify", path("public.pem"), "-signature", path("signature"), path("data")])
        #expect(verified.status == 0, "\(verified.output)")
        // Not PKCS#1 v1.5: openssl's RS256 check refuses it, so the one above can fail.
        #expect(
            try await openssl([
                "dgst", "-sha256", "-verify", path("public.pem"), "-signature", path("signature"), path("data"),
            ]).status != 0)

        try await openssl(
            ["dgst", "-sha256"] + pss + ["-sign", path("key.pem"), "-out", path("theirs"), path("data")])
        let theirs = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("theirs"))))
        let publicKey = try CryptoKey(publicKeyPEM: key.publicKeyPEM())
        #expect(try publicKey.verifyPS256(data, signature: theirs))
        #expect(try !publicKey.verifyPS256(Array("other".utf8), signature: theirs))
        #expect(try !publicKey.verifyRS256(data, signature: theirs))
    }

    @Test func es256SignatureIsRawRSAndVerifiesWithOpenSSLAsDER() async throws {
        try await openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("ec.pem"),
        ])
        try await openssl(["pkey", "-in", path("ec.pem"), "-pubout", "-out", path("ec-public.pem")])
        let key = try CryptoKey(privateKeyPEM: try String(contentsOfFile: path("ec.pem"), encoding: .utf8))
        #expect(key.kind == .ecP256)
        let data = Array("apns provider token".utf8)
        let signature = try key.signES256(data)
        #expect(signature.count == 64)
        try Data(data).write(to: URL(fileURLWithPath: path("data")))
        try Data(derSignature(r: Array(signature[0..<32]), s: Array(signature[32..<64]))).write(
            to: URL(fileURLWithPath: path("signature.der")))
        let verified = try await openssl([
            "dgst", "-sha256", "-verify", path("ec-public.pem"), "-signature", path("signature.der"), path("data"),
        ])
        #expect(verified.status == 0, "\(verified.output)")
    }

    @Test func ecdhAgreesWithOpenSSLAndES256VerifiesBothWays() async throws {
        for name in ["ours", "theirs"] {
            try await openssl([
                "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("\(name).pem"),
            ])
            try await openssl(["pkey", "-in", path("\(name).pem"), "-pubout", "-out", path("\(name)-public.pem")])
        }
        try await openssl([
            "pkeyutl", "-derive", "-inkey", path("ours.pem"), "-peerkey", path("theirs-public.pem"), "-out",
            path("secret"),
        ])
        let ours = try CryptoKey(privateKeyPEM: try String(contentsOfFile: path("ours.pem"), encoding: .utf8))
        let theirs = try CryptoKey(privateKeyPEM: try String(contentsOfFile: path("theirs.pem"), encoding: .utf8))
        // Their public half as a raw point, the form browsers give (p256dh).
        let theirPoint = try CryptoKey(p256PublicPoint: try theirs.publicPoint())
        let secret = try ours.sharedSecret(with: theirPoint)
        #expect(secret.count == 32)
        #expect(secret == [UInt8](try Data(contentsOf: URL(fileURLWithPath: path("secret")))))

        let data = Array("vapid signing input".utf8)
        let signature = try ours.signES256(data)
        let ourPoint = try CryptoKey(p256PublicPoint: try ours.publicPoint())
        #expect(try ourPoint.verifyES256(data, signature: signature))
        #expect(try !ourPoint.verifyES256(Array("other".utf8), signature: signature))
        #expect(try !theirPoint.verifyES256(data, signature: signature))
    }

    @Test func badKeysFailWithOpenSSLsReason() async throws {
        let label = "PRIVATE" + " KEY"
        #expect {
            try CryptoKey(privateKeyPEM: "-----BEGIN \(label)-----\nnot base64\n-----END \(label)-----\n")
        } throws: {
            ($0 as? CryptoError)?.message.isEmpty == false
        }
        try await openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("ec.pem"),
        ])
        let ec = try CryptoKey(privateKeyPEM: try String(contentsOfFile: path("ec.pem"), encoding: .utf8))
        #expect { try ec.signRS256([1, 2, 3]) } throws: { "\($0)".contains("RS256 needs an RSA key") }
    }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` from raw r and s, for openssl.
    func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }
}
