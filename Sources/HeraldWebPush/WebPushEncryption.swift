import HeraldCrypto

/// Message encryption for Web Push (RFC 8291), in the `aes128gcm` content coding (RFC 8188),
/// as one record:
///
///     body = salt (16) ‖ record size (4) ‖ key id length (1) = 65 ‖ sender's public key (65)
///            ‖ AES-128-GCM(plaintext ‖ 0x02) with its 16-byte tag
///
/// Each message has a fresh P-256 key and salt. The key schedule (the HKDFs as RFC 8291 §3.4
/// writes them; ``decrypt`` computes them this way, the sender in `WebPushCipher`):
///
///     ecdh     = ECDH(sender's private key, browser's p256dh)
///     IKM      = HKDF(salt: auth, ecdh, info: "WebPush: info" ‖ 0 ‖ p256dh ‖ sender's public key, 32)
///     CEK      = HKDF(salt: salt, IKM, info: "Content-Encoding: aes128gcm" ‖ 0, 16)
///     nonce    = HKDF(salt: salt, IKM, info: "Content-Encoding: nonce" ‖ 0, 12)
public enum WebPushEncryption {
    /// The most ciphertext a push service must accept (RFC 8030 §7.2).
    public static let maxBodyBytes = 4096
    static let headerBytes = 16 + 4 + 1 + 65
    /// The longest plaintext that fits: the body less the header, the tag and the delimiter.
    public static let maxPlaintextBytes = maxBodyBytes - headerBytes - 16 - 1

    /// The keys derived for one message, exposed for tests against RFC 8291's example.
    public struct Keys: Equatable {
        public var inputKeyMaterial: [UInt8]
        public var contentEncryptionKey: [UInt8]
        public var nonce: [UInt8]
    }

    /// Encrypts `plaintext` for `subscription`: the body to send. `senderScalar` (the private
    /// half of the sender's key) and `salt` are fresh unless given (only tests give them, to
    /// reproduce RFC 8291's example).
    ///
    /// Nothing of one message's keys is reused for another: RFC 8291 §3.1 has the sender make a
    /// new key pair for each message, and RFC 8188 §2.1 a salt never used twice with the same
    /// keying material, so the ECDH and every derived key are per message too. What stays is
    /// the subscription's own (its `p256dh` and `auth`) and the labels. The cost is cut instead
    /// by doing all of it in one call, on OpenSSL's P-256 arithmetic and SHA-256 directly.
    ///
    /// Throws ``WebPushError`` for a payload too large, `WebPushCipher.InvalidBrowserKey` when
    /// the subscription's `p256dh` is not a point on P-256, and `CryptoError` otherwise.
    public static func encrypt(
        _ plaintext: [UInt8], for subscription: WebPushSubscription, senderScalar: [UInt8]? = nil,
        salt: [UInt8]? = nil
    ) throws -> [UInt8] {
        guard plaintext.count <= maxPlaintextBytes else {
            throw WebPushError(
                "payload is \(plaintext.count) bytes, over Web Push's \(maxPlaintextBytes) bytes of plaintext")
        }
        return try WebPushCipher.seal(
            record: plaintext + [2], browserKey: subscription.p256dh, auth: subscription.auth,
            senderScalar: senderScalar, salt: salt)
    }

    /// Decrypts a body as the browser does, with the subscription's private key: what the
    /// emulator's push service does to check what Herald sent.
    public static func decrypt(_ body: [UInt8], receiverKey: CryptoKey, auth: [UInt8]) throws -> [UInt8] {
        guard body.count > headerBytes + 16, body[20] == 65 else {
            throw WebPushError("not an aes128gcm body with a P-256 key id")
        }
        let salt = Array(body[0..<16])
        let senderPublic = Array(body[21..<86])
        let keys = try deriveKeys(
            sharedSecret: try receiverKey.sharedSecret(with: try CryptoKey(p256PublicPoint: senderPublic)), auth: auth,
            receiverPublic: try receiverKey.publicPoint(), senderPublic: senderPublic, salt: salt)
        let padded = try AES128GCM.open(Array(body[86...]), key: keys.contentEncryptionKey, nonce: keys.nonce)
        // The last record ends with 0x02 and any number of zero bytes of padding after it.
        guard let delimiter = padded.lastIndex(where: { $0 != 0 }), padded[delimiter] == 2 else {
            throw WebPushError("the record has no last-record delimiter")
        }
        return Array(padded[..<delimiter])
    }

    public static func deriveKeys(
        sharedSecret: [UInt8], auth: [UInt8], receiverPublic: [UInt8], senderPublic: [UInt8], salt: [UInt8]
    ) throws -> Keys {
        let keyInfo = Array("WebPush: info".utf8) + [0] + receiverPublic + senderPublic
        let ikm = try HKDF.sha256(salt: auth, inputKeyMaterial: sharedSecret, info: keyInfo, length: 32)
        return Keys(
            inputKeyMaterial: ikm,
            contentEncryptionKey: try HKDF.sha256(
                salt: salt, inputKeyMaterial: ikm, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16),
            nonce: try HKDF.sha256(
                salt: salt, inputKeyMaterial: ikm, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12))
    }
}
