import Foundation
import HeraldCore

/// Signed JSON Web Tokens (compact form: `header.claims.signature`, base64url without padding).
public enum JWT {
    /// RS256, as Google's service accounts sign their assertions.
    public static func signRS256(header: JSONValue, claims: JSONValue, key: CryptoKey) throws -> String {
        try sign(header: header, claims: claims, with: key.signRS256)
    }

    /// PS256, as Huawei's HarmonyOS Push Kit takes a service account's token.
    public static func signPS256(header: JSONValue, claims: JSONValue, key: CryptoKey) throws -> String {
        try sign(header: header, claims: claims, with: key.signPS256)
    }

    /// ES256, as APNs provider tokens and VAPID use it.
    public static func signES256(header: JSONValue, claims: JSONValue, key: CryptoKey) throws -> String {
        try sign(header: header, claims: claims, with: key.signES256)
    }

    private static func sign(header: JSONValue, claims: JSONValue, with signer: ([UInt8]) throws -> [UInt8]) throws
        -> String
    {
        let input = Base64URL.encode(Array(header.encoded.utf8)) + "." + Base64URL.encode(Array(claims.encoded.utf8))
        return input + "." + Base64URL.encode(try signer(Array(input.utf8)))
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
