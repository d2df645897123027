import ArgumentParser
import Foundation
import HeraldCrypto
import HeraldWebPush

/// `herald-bench crypto`: what a send's cryptography costs on this machine, per message: Web
/// Push's encryption (a P-256 key pair, ECDH, HKDF, AES-128-GCM) and one ES256 signature (a
/// VAPID or APNs token, made once per origin or key and reused, so rare on the hot path).
struct CryptoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto", abstract: "Time Web Push encryption and ES256 signatures, per message.")

    @Option(help: "Messages to encrypt.") var count = 20_000

    func run() throws {
        let browser = try CryptoKey.generateP256()
        let subscription = try WebPushSubscription(
            endpoint: "https://push.example.net/push/1", p256dh: try browser.publicPoint(),
            auth: Array(repeating: 7, count: 16))
        // About the size of a notification's document.
        let payload = [UInt8](repeating: 0x61, count: 400)
        var started = ContinuousClock.now
        for _ in 0..<count { _ = try WebPushEncryption.encrypt(payload, for: subscription) }
        let encrypt = (ContinuousClock.now - started) / count
        let key = try CryptoKey.generateP256()
        started = ContinuousClock.now
        for index in 0..<count { _ = try key.signES256(Array("token \(index)".utf8)) }
        let sign = (ContinuousClock.now - started) / count
        print("Web Push encryption of a 400-byte payload: \(Self.micro(encrypt)) µs a message (one core)")
        print("ES256 signature (VAPID or APNs token): \(Self.micro(sign)) µs each")
    }

    static func micro(_ duration: Duration) -> String {
        String(
            format: "%.1f", Double(duration.components.attoseconds) / 1e12 + Double(duration.components.seconds) * 1e6)
    }
}
