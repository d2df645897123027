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
        let browserPoint = try browser.publicPoint()
        let auth = [UInt8](repeating: 7, count: 16)
        let subscription = try WebPushSubscription(
            endpoint: "https://push.example.net/push/1", p256dh: browserPoint, auth: auth)
        // About the size of a notification's document.
        let payload = [UInt8](repeating: 0x61, count: 400)
        func time(_ body: () throws -> Void) rethrows -> Duration {
            let started = ContinuousClock.now
            for _ in 0..<count { try body() }
            return (ContinuousClock.now - started) / count
        }
        let encrypt = try time { _ = try WebPushEncryption.encrypt(payload, for: subscription) }
        // The same steps through OpenSSL's key objects (EVP_PKEY) and its HKDF, as the browser's
        // side (`WebPushEncryption.decrypt`) takes them, and as sending did before: what one call
        // on the curve's arithmetic saves.
        let salt = [UInt8](repeating: 1, count: 16)
        let sender = try CryptoKey.generateP256()
        let senderPoint = try sender.publicPoint()
        let loadedBrowser = try CryptoKey(p256PublicPoint: browserPoint)
        let secret = try sender.sharedSecret(with: loadedBrowser)
        let keys = try WebPushEncryption.deriveKeys(
            sharedSecret: secret, auth: auth, receiverPublic: browserPoint, senderPublic: senderPoint, salt: salt)
        let steps = [
            ("a key pair", try time { _ = try CryptoKey.generateP256().publicPoint() }),
            ("loading the browser's key", try time { _ = try CryptoKey(p256PublicPoint: browserPoint) }),
            ("ECDH", try time { _ = try sender.sharedSecret(with: loadedBrowser) }),
            (
                "three HKDFs",
                try time {
                    _ = try WebPushEncryption.deriveKeys(
                        sharedSecret: secret, auth: auth, receiverPublic: browserPoint, senderPublic: senderPoint,
                        salt: salt)
                }
            ),
            (
                "AES-128-GCM",
                try time { _ = try AES128GCM.seal(payload + [2], key: keys.contentEncryptionKey, nonce: keys.nonce) }
            ),
        ]
        let key = try CryptoKey.generateP256()
        var index = 0
        let sign = try time {
            index += 1
            _ = try key.signES256(Array("token \(index)".utf8))
        }
        print("Web Push encryption of a 400-byte payload: \(Self.micro(encrypt)) µs a message (one core)")
        let total = steps.reduce(Duration.zero) { $0 + $1.1 }
        print(
            "  the same through EVP keys and HKDF: \(Self.micro(total)) µs = "
                + steps.map { "\($0.0) \(Self.micro($0.1))" }.joined(separator: ", "))
        print("ES256 signature (VAPID or APNs token): \(Self.micro(sign)) µs each")
    }

    static func micro(_ duration: Duration) -> String {
        String(
            format: "%.1f", Double(duration.components.attoseconds) / 1e12 + Double(duration.components.seconds) * 1e6)
    }
}
