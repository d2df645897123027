import CJWTCrypto

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

/// HMAC-SHA-256.
public enum HMAC {
    public static func sha256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        let status = herald_hmac_sha256(key, key.count, data, data.count, &mac)
        precondition(status == 0, "HMAC-SHA256 failed")
        return mac
    }
}
