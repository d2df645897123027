import Foundation

/// Signed JSON Web Tokens (compact form: `header.claims.signature`, base64url without padding).
public enum JWT {
    /// The OAuth scope for FCM sends.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The audience Google's libraries put in a service account's assertion.
    public static let tokenAudience = "https://oauth2.googleapis.com/token"

    /// The assertion a service account trades for an access token (RFC 7523), valid for `lifetime`
    /// (at most an hour).
    public static func serviceAccountAssertion(
        for account: ServiceAccount, scope: String = messagingScope, issuedAt: Date, lifetime: TimeInterval = 3600
    ) throws -> String {
        let issued = Int(issuedAt.timeIntervalSince1970)
        return try signRS256(
            header: .object([
                ("alg", .string("RS256")), ("typ", .string("JWT")), ("kid", .string(account.privateKeyID)),
            ]),
            claims: .object([
                ("iss", .string(account.clientEmail)),
                ("scope", .string(scope)),
                ("aud", .string(tokenAudience)),
                ("iat", .int(issued)),
                ("exp", .int(issued + Int(min(lifetime, 3600)))),
            ]),
            key: account.key)
    }

    public static func signRS256(header: JSONValue, claims: JSONValue, key: SigningKey) throws -> String {
        let input = Base64URL.encode(Array(header.encoded.utf8)) + "." + Base64URL.encode(Array(claims.encoded.utf8))
        return input + "." + Base64URL.encode(try key.signRS256(Array(input.utf8)))
    }

    /// An APNs provider token's form (ES256), for direct APNs later.
    public static func signES256(header: JSONValue, claims: JSONValue, key: SigningKey) throws -> String {
        let input = Base64URL.encode(Array(header.encoded.utf8)) + "." + Base64URL.encode(Array(claims.encoded.utf8))
        return input + "." + Base64URL.encode(try key.signES256(Array(input.utf8)))
    }

    /// The parts of a compact JWT, decoded but not verified.
    public struct Parts {
        public var header: [String: Any]
        public var claims: [String: Any]
        public var signingInput: [UInt8]
        public var signature: [UInt8]
    }

    public static func decode(_ token: String) -> Parts? {
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false)
        guard pieces.count == 3, let header = Base64URL.decode(pieces[0]), let claims = Base64URL.decode(pieces[1]),
            let signature = Base64URL.decode(pieces[2]),
            let headerObject = try? JSONSerialization.jsonObject(with: Data(header)) as? [String: Any],
            let claimsObject = try? JSONSerialization.jsonObject(with: Data(claims)) as? [String: Any]
        else { return nil }
        return Parts(
            header: headerObject, claims: claimsObject, signingInput: Array("\(pieces[0]).\(pieces[1])".utf8),
            signature: signature)
    }
}
