import CCrypto

/// HKDF-SHA-256 (RFC 5869), as Web Push's key derivation uses it.
public enum HKDF {
    /// Extract and expand in one: `length` bytes of key material.
    public static func sha256(salt: [UInt8], inputKeyMaterial: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        try CryptoKey.withErrorBuffer { error in
            var out = [UInt8](repeating: 0, count: length)
            let status = herald_hkdf_sha256(
                salt, salt.count, inputKeyMaterial, inputKeyMaterial.count, info, info.count, &out, length, error, 256)
            guard status == 0 else { throw CryptoError(error) }
            return out
        }
    }
}

/// AES-128-GCM without associated data; the 16-byte tag follows the ciphertext.
public enum AES128GCM {
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        try check(key: key, nonce: nonce)
        return try CryptoKey.withErrorBuffer { error in
            var out = [UInt8](repeating: 0, count: plaintext.count + 16)
            let length = herald_aes128gcm_encrypt(
                key, nonce, plaintext, plaintext.count, &out, out.count, error, 256)
            guard length == out.count else { throw CryptoError(error) }
            return out
        }
    }

    /// The plaintext, or an error when the tag does not match (a wrong key or altered bytes).
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        try check(key: key, nonce: nonce)
        return try CryptoKey.withErrorBuffer { error in
            var out = [UInt8](repeating: 0, count: max(0, sealed.count - 16))
            let length = herald_aes128gcm_decrypt(key, nonce, sealed, sealed.count, &out, out.count, error, 256)
            guard length >= 0 else { throw CryptoError(error) }
            return Array(out.prefix(length))
        }
    }

    private static func check(key: [UInt8], nonce: [UInt8]) throws {
        guard key.count == 16, nonce.count == 12 else {
            throw CryptoError(message: "AES-128-GCM takes a 16-byte key and a 12-byte nonce")
        }
    }
}

/// Digests of a message, as some providers sign their requests with them (OPPO's SHA-256 of its
/// key, a time and its secret; vivo's MD5), and their lower-case hex.
public enum Digest {
    public static func sha256(_ data: [UInt8]) -> [UInt8] { digest(Int32(HERALD_DIGEST_SHA256), data, length: 32) }
    /// MD5 proves nothing against an attacker: only for a provider that asks for it.
    public static func md5(_ data: [UInt8]) -> [UInt8] { digest(Int32(HERALD_DIGEST_MD5), data, length: 16) }

    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    private static func digest(_ algorithm: Int32, _ data: [UInt8], length: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let status = herald_digest(algorithm, data, data.count, &out)
        precondition(status == 0, "digest failed")
        return out
    }
}

/// HMAC-SHA-256.
public enum HMAC {
    public static func sha256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        let status = herald_hmac_sha256(key, key.count, data, data.count, &mac)
        precondition(status == 0, "HMAC-SHA256 failed")
        return mac
    }
}

/// The sender's side of Web Push's message encryption (RFC 8291 §3.4, one aes128gcm record of
/// RFC 8188) in one call into OpenSSL: a fresh key pair and salt, ECDH with the browser's key,
/// the key schedule and the seal. `HeraldWebPush.WebPushEncryption` owns the format around it.
public enum WebPushCipher {
    /// The browser's key is not an uncompressed point on P-256: the subscription is unusable.
    public struct InvalidBrowserKey: Error, CustomStringConvertible {
        public var description: String {
            "the subscription's keys.p256dh is not a point on P-256: the browser must subscribe again"
        }
    }

    /// The whole body for `record` (the plaintext and its 0x02 delimiter). `senderScalar` and
    /// `salt` are fresh unless given (only tests give them, to reproduce RFC 8291's example).
    public static func seal(
        record: [UInt8], browserKey: [UInt8], auth: [UInt8], senderScalar: [UInt8]? = nil, salt: [UInt8]? = nil
    ) throws -> [UInt8] {
        guard browserKey.count == 65, auth.count == 16, senderScalar.map({ $0.count == 32 }) ?? true,
            salt.map({ $0.count == 16 }) ?? true
        else { throw CryptoError(message: "Web Push takes a 65-byte key, a 16-byte secret and salt, a 32-byte scalar") }
        var body = [UInt8](repeating: 0, count: 86 + record.count + 16)
        try CryptoKey.withErrorBuffer { error in
            try withOptionalPointer(senderScalar) { scalar in
                try withOptionalPointer(salt) { salt in
                    let length = herald_webpush_encrypt(
                        browserKey, auth, record, record.count, scalar, salt, &body, body.count, error, 256)
                    if length == -2 { throw InvalidBrowserKey() }
                    guard length == body.count else { throw CryptoError(error) }
                }
            }
        }
        return body
    }

    private static func withOptionalPointer<T>(_ bytes: [UInt8]?, _ body: (UnsafePointer<UInt8>?) throws -> T)
        rethrows -> T
    {
        guard let bytes else { return try body(nil) }
        return try bytes.withUnsafeBufferPointer { try body($0.baseAddress) }
    }
}
