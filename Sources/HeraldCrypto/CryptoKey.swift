import CCrypto
import Foundation

/// A private (or public) key loaded once into OpenSSL and kept there: RSA for service accounts,
/// P-256 for ES256 signatures (APNs, VAPID) and Web Push's ECDH. Its PEM text is not kept in
/// Swift, and nothing here logs or prints key material.
public final class CryptoKey: @unchecked Sendable {
    // The EVP_PKEY is immutable after loading; OpenSSL allows concurrent signing with it.
    private let key: OpaquePointer

    public enum Kind: Sendable { case rsa, ecP256, other }

    private init(_ key: OpaquePointer) { self.key = key }

    deinit { herald_key_free(key) }

    /// Loads a PEM private key: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`).
    public convenience init(privateKeyPEM pem: String) throws {
        self.init(try Self.load(pem, herald_key_load_private_pem))
    }

    /// Loads the PEM private key in `file` (a VAPID key, an APNs .p8), naming `what` it is in
    /// the error: the file cannot be read, or holds no usable key.
    public convenience init(privateKeyFile file: String, what: String) throws {
        let pem: String
        do {
            pem = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw CryptoError(message: "cannot read the \(what) file \(file): \(error.localizedDescription)")
        }
        do {
            try self.init(privateKeyPEM: pem)
        } catch let error as CryptoError {
            throw CryptoError(message: "the \(what) file \(file) holds no usable private key: \(error)")
        }
    }

    /// Loads a PEM public key (`PUBLIC KEY`), for verifying.
    public convenience init(publicKeyPEM pem: String) throws {
        self.init(try Self.load(pem, herald_key_load_public_pem))
    }

    /// A new RSA key, for test and demo service accounts.
    public static func generateRSA(bits: Int = 2048) throws -> CryptoKey {
        try withErrorBuffer { error in
            guard let key = herald_key_generate_rsa(Int32(bits), error, 256) else { throw CryptoError(error) }
            return CryptoKey(key)
        }
    }

    /// A new P-256 key: a VAPID key pair, or Web Push's key for one message.
    public static func generateP256() throws -> CryptoKey {
        try withErrorBuffer { error in
            guard let key = herald_key_generate_p256(error, 256) else { throw CryptoError(error) }
            return CryptoKey(key)
        }
    }

    /// A P-256 key from its raw form: the 65-byte uncompressed public point (as a browser's
    /// `p256dh` key), and the 32-byte private scalar when there is one. The point is checked to
    /// be on the curve.
    public convenience init(p256PublicPoint point: [UInt8], privateScalar: [UInt8]? = nil) throws {
        let key = try Self.withErrorBuffer { error in
            let loaded: OpaquePointer? =
                if let privateScalar {
                    herald_key_from_raw_p256(point, point.count, privateScalar, privateScalar.count, error, 256)
                } else {
                    herald_key_from_raw_p256(point, point.count, nil, 0, error, 256)
                }
            guard let loaded else { throw CryptoError(error) }
            return loaded
        }
        self.init(key)
    }

    public var kind: Kind {
        switch Int(herald_key_kind(key)) {
        case Int(HERALD_KEY_RSA.rawValue): return .rsa
        case Int(HERALD_KEY_EC_P256.rawValue): return .ecP256
        default: return .other
        }
    }

    /// The public half, as PEM.
    public func publicKeyPEM() throws -> String { try pem(herald_key_public_pem) }

    /// The key as PKCS#8 PEM, for writing a generated service-account file.
    public func privateKeyPEM() throws -> String { try pem(herald_key_private_pem) }

    /// RSASSA-PKCS1-v1_5 with SHA-256.
    public func signRS256(_ data: [UInt8]) throws -> [UInt8] { try sign(data, capacity: 1024, herald_sign_rs256) }

    /// RSASSA-PSS with SHA-256 (JWS's PS256: MGF1 over SHA-256, a salt as long as the digest).
    public func signPS256(_ data: [UInt8]) throws -> [UInt8] { try sign(data, capacity: 1024, herald_sign_ps256) }

    /// ECDSA P-256 with SHA-256, as the 64-byte r‖s that JWS requires.
    public func signES256(_ data: [UInt8]) throws -> [UInt8] { try sign(data, capacity: 64, herald_sign_es256) }

    /// The public half of a P-256 key as the 65-byte uncompressed point (0x04 ‖ x ‖ y).
    public func publicPoint() throws -> [UInt8] {
        try Self.withErrorBuffer { error in
            var point = [UInt8](repeating: 0, count: 65)
            guard herald_key_public_raw(key, &point, point.count, error, 256) == 65 else { throw CryptoError(error) }
            return point
        }
    }

    /// ECDH on P-256: the 32-byte shared secret of this (private) key and `peer`'s public half.
    public func sharedSecret(with peer: CryptoKey) throws -> [UInt8] {
        try Self.withErrorBuffer { error in
            var secret = [UInt8](repeating: 0, count: 32)
            guard herald_ecdh(key, peer.key, &secret, secret.count, error, 256) == 32 else { throw CryptoError(error) }
            return secret
        }
    }

    /// Checks an ES256 signature (64 bytes, r ‖ s).
    public func verifyES256(_ data: [UInt8], signature: [UInt8]) throws -> Bool {
        try verify(data, signature, herald_verify_es256)
    }

    /// Checks an RS256 signature.
    public func verifyRS256(_ data: [UInt8], signature: [UInt8]) throws -> Bool {
        try verify(data, signature, herald_verify_rs256)
    }

    /// Checks a PS256 signature.
    public func verifyPS256(_ data: [UInt8], signature: [UInt8]) throws -> Bool {
        try verify(data, signature, herald_verify_ps256)
    }

    private typealias Verifier = (
        OpaquePointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<CChar>?, Int
    ) -> Int32

    private func verify(_ data: [UInt8], _ signature: [UInt8], _ verifier: Verifier) throws -> Bool {
        try Self.withErrorBuffer { error in
            let result = verifier(key, data, data.count, signature, signature.count, error, 256)
            if result < 0 { throw CryptoError(error) }
            return result == 1
        }
    }

    private typealias Signer = (
        OpaquePointer?, UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<CChar>?, Int
    ) -> Int

    private func sign(_ data: [UInt8], capacity: Int, _ signer: Signer) throws -> [UInt8] {
        try Self.withErrorBuffer { error in
            var signature = [UInt8](repeating: 0, count: capacity)
            let length = signer(key, data, data.count, &signature, capacity, error, 256)
            if length < 0 { throw CryptoError(error) }
            return Array(signature.prefix(length))
        }
    }

    private func pem(
        _ writer: (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, Int) -> Int
    ) throws -> String {
        try Self.withErrorBuffer { error in
            var buffer = [CChar](repeating: 0, count: 8192)
            guard writer(key, &buffer, buffer.count, error, 256) >= 0 else { throw CryptoError(error) }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    private static func load(
        _ pem: String, _ loader: (UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, Int) -> OpaquePointer?
    ) throws -> OpaquePointer {
        try withErrorBuffer { error in
            guard let key = pem.withCString({ loader($0, strlen($0), error, 256) }) else { throw CryptoError(error) }
            return key
        }
    }

    static func withErrorBuffer<T>(_ body: (UnsafeMutablePointer<CChar>) throws -> T) throws -> T {
        let error = UnsafeMutablePointer<CChar>.allocate(capacity: 256)
        error.initialize(repeating: 0, count: 256)
        defer { error.deallocate() }
        return try body(error)
    }
}

/// What Herald reads of a TLS client certificate.
public enum Certificate {
    /// When the certificate in `file` (PEM, or a PKCS#12 bundle opened with `password`) expires.
    public static func expiry(file: String, password: String? = nil) throws -> Date {
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        return try CryptoKey.withErrorBuffer { error in
            var notAfter: Int64 = 0
            let status = [UInt8](data).withUnsafeBufferPointer { bytes in
                herald_certificate_not_after(bytes.baseAddress, bytes.count, password, &notAfter, error, 256)
            }
            guard status == 0 else { throw CryptoError(error) }
            return Date(timeIntervalSince1970: TimeInterval(notAfter))
        }
    }
}

/// OpenSSL refused a key or an operation (the message is then OpenSSL's reason text), or a key
/// file could not be read or used.
public struct CryptoError: Error, CustomStringConvertible {
    public var message: String
    /// Whether the message is OpenSSL's own reason text.
    let fromOpenSSL: Bool
    init(_ buffer: UnsafePointer<CChar>) {
        message = String(cString: buffer)
        fromOpenSSL = true
    }
    init(message: String) {
        self.message = message
        fromOpenSSL = false
    }
    public var description: String { fromOpenSSL ? "OpenSSL: \(message)" : message }
}
