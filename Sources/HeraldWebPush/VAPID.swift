import Foundation
import HeraldCore
import HeraldCrypto

/// An application server's VAPID identity (RFC 8292): a P-256 key pair and a contact. Push
/// services tie a subscription to the public key the web app gave the browser
/// (`applicationServerKey`), and accept only requests signed with its private half.
public struct VAPIDKey: Sendable {
    let key: CryptoKey
    /// The public key, 65 bytes uncompressed, base64url: the `k=` parameter, and the
    /// `applicationServerKey` the web app subscribes with.
    public let publicKey: String
    /// `mailto:` or `https:`: whom the push service can contact about this sender.
    public let subject: String

    public init(key: CryptoKey, subject: String) throws {
        guard key.kind == .ecP256 else { throw WebPushError("a VAPID key must be an EC P-256 private key") }
        guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://") else {
            throw WebPushError("the VAPID subject must be a mailto: or https: URI")
        }
        self.key = key
        self.publicKey = Base64URL.encode(try key.publicPoint())
        self.subject = subject
    }

    /// Loads the PEM private key in `file` (as `herald vapid-key` writes it).
    public static func load(file: String, subject: String) throws -> VAPIDKey {
        do {
            return try VAPIDKey(key: try CryptoKey(privateKeyFile: file, what: "VAPID key"), subject: subject)
        } catch let error as CryptoError {
            throw WebPushError(error.description)
        }
    }

    /// A signed token for one push service, valid until `expiry` (at most 24 hours ahead).
    public func token(audience: String, expiry: Date) throws -> String {
        try JWT.signES256(
            header: .object([("typ", .string("JWT")), ("alg", .string("ES256"))]),
            claims: .object([
                ("aud", .string(audience)), ("exp", .int(Int(expiry.timeIntervalSince1970))),
                ("sub", .string(subject)),
            ]),
            key: key)
    }
}

/// VAPID `Authorization` headers, one token per push service origin, reused until an hour
/// before it expires: a token is an ES256 signature, and a busy sender reaches a handful of
/// origins (FCM, Mozilla, Apple, Microsoft), not one per subscription.
public actor VAPIDAuthorizations {
    /// How long a token is valid. RFC 8292 allows at most 24 hours; 12 leaves room for clock skew.
    public static let lifetime: TimeInterval = 12 * 3600
    /// A token this close to its expiry is replaced.
    public static let renewal: TimeInterval = 3600

    public let key: VAPIDKey
    private let clock: any WallClock
    private var cached: [String: (header: String, expiry: Date)] = [:]
    /// Tokens signed so far (for tests).
    public private(set) var signed = 0

    public init(key: VAPIDKey, clock: any WallClock = SystemClock()) {
        self.key = key
        self.clock = clock
    }

    /// `vapid t=<JWT>, k=<public key>` for a push service's origin.
    public func header(for origin: String) throws -> String {
        let now = clock.now()
        if let entry = cached[origin], entry.expiry.timeIntervalSince(now) > Self.renewal { return entry.header }
        let expiry = now.addingTimeInterval(Self.lifetime)
        let header = "vapid t=\(try key.token(audience: origin, expiry: expiry)), k=\(key.publicKey)"
        cached[origin] = (header, expiry)
        signed += 1
        return header
    }
}
