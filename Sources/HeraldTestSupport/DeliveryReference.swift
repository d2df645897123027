import Foundation
import HeraldCrypto

/// A second implementation of the report reference, for tests: the claim makes references and
/// `herald.open_reference` checks them (`migrations/functions/dispatch.sql` says how); this one,
/// over OpenSSL's HMAC rather than PostgreSQL's sha256, checks what they make.
public struct DeliveryReference: Sendable {
    private let secret: [UInt8]
    /// Bytes of the tag kept; 16 (128 bits) is ample against guessing.
    static let tagLength = 16

    public init(secret: [UInt8]) {
        precondition(!secret.isEmpty, "the delivery-report secret must not be empty")
        self.secret = secret
    }

    /// The reference for one delivery to one device.
    public func make(deliveryID: Int64, deviceID: Int64) -> String {
        let body = Self.bytes(deliveryID) + Self.bytes(deviceID)
        return Base64URL.encode(body + tag(body))
    }

    /// The delivery and device a reference names, or nil if it was not made with this secret.
    public func open(_ reference: String) -> (deliveryID: Int64, deviceID: Int64)? {
        guard let bytes = Base64URL.decode(Substring(reference)), bytes.count == 16 + Self.tagLength else { return nil }
        let body = Array(bytes[0..<16])
        // Constant-time comparison, so timing does not leak how much of a forged tag matched.
        let expected = tag(body)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, bytes[16...]) { difference |= a ^ b }
        guard difference == 0 else { return nil }
        return (Self.integer(body[0..<8]), Self.integer(body[8..<16]))
    }

    private func tag(_ body: [UInt8]) -> [UInt8] {
        Array(HMAC.sha256(key: secret, body).prefix(Self.tagLength))
    }

    private static func bytes(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int64 {
        bytes.reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}
