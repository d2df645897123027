import Foundation

/// What a provider's receipt says became of one message it took: delivered to the device, or
/// not and why, at the provider's time. The provider's server posts receipts to the daemon's
/// endpoint (`POST /v1/receipts/{provider}/{app}`); a ``ReceiptReader`` checks and reads them and
/// `herald.record_receipts` records them.
public struct ProviderReceipt: Sendable, Equatable {
    /// The delivery the send tagged the message with; nil when the tag is not Herald's.
    public var deliveryID: Int64?
    /// The delivery's report reference the send gave the provider to echo, which names the
    /// delivery and its device under Herald's HMAC: for a provider that signs nothing, each of its
    /// receipts proves itself. Nil when the provider echoes a tag (``deliveryID``) instead.
    public var reference: String?
    /// The token the provider says it was for.
    public var token: String
    /// The provider's id of the send (Push Kit's request id).
    public var messageID: String?
    public var delivered: Bool
    /// Its meaning in words, with the provider's code.
    public var meaning: String
    public var at: Date
    public var effect: Effect

    /// What a receipt proves of the device, beyond the message.
    public enum Effect: String, Sendable {
        case none
        /// The token is dead (the app is not installed): the device is soft-disabled, as a dead
        /// token in a send's answer disables it.
        case tokenDead = "token_dead"
        /// The device did not show it because its notifications are turned off; it stays enabled.
        case notificationsOff = "notifications_off"
    }

    public init(
        deliveryID: Int64?, reference: String? = nil, token: String, messageID: String?, delivered: Bool,
        meaning: String, at: Date, effect: Effect
    ) {
        self.deliveryID = deliveryID
        self.reference = reference
        self.token = token
        self.messageID = messageID
        self.delivered = delivered
        self.meaning = meaning
        self.at = at
        self.effect = effect
    }

    /// The tag a send gives a message so that its receipt names its delivery (Push Kit's
    /// biTag): `herald-` and the delivery's id.
    public static func tag(deliveryID: Int64) -> String { "herald-\(deliveryID)" }

    /// The delivery a tag names, or nil when it is not one of ``tag(deliveryID:)``'s.
    public static func deliveryID(tag: String?) -> Int64? {
        guard let tag, tag.hasPrefix("herald-"), tag.count <= 27 else { return nil }
        let digits = tag.dropFirst(7)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(digits)
    }
}

/// A provider's receipt callback as its server posts it: how it is signed, and what it holds.
public protocol ReceiptReader: Sendable {
    /// Whether the provider signs its posts with the app's credentials (Huawei does); when not,
    /// each receipt carries the delivery's report reference and proves itself, and a post has no
    /// signature to check or take once.
    var signsPosts: Bool { get }
    /// The provider (`herald.providers`), as the receipt URL names it.
    var provider: String { get }
    /// The app's settings table that holds its receipt credentials (`receipt_username`,
    /// `receipt_key_file`).
    var settingsTable: String { get }
    /// Why a post's signature cannot be right whatever the app's credentials (no header, a
    /// malformed one, one signed too far from `now`), checked before the credentials are read;
    /// nil when it may be.
    func screen(headers: [String: String], now: Date) -> ReceiptRefusal?
    /// What makes the signature one of a kind (its time and nonce), once checked against the
    /// app's credentials at `now`, so that it is taken once; the refusal otherwise.
    func authenticate(headers: [String: String], credentials: ReceiptCredentials, now: Date) -> Result<
        String, ReceiptRefusal
    >
    /// The receipts the body holds, and how many it held that could not be read.
    func receipts(in body: [UInt8]) -> Result<(receipts: [ProviderReceipt], unreadable: Int), ReceiptRefusal>
    /// The answer the provider's server expects for a post taken, whatever became of each receipt.
    var acceptedAnswer: String { get }
    /// The answer for a post refused, with the reason.
    func refusedAnswer(_ refusal: ReceiptRefusal) -> String
}

/// The app's receipt credentials: the callback user name, and the key as its file holds it.
public struct ReceiptCredentials: Sendable {
    public var username: String
    public var key: [UInt8]

    public init(username: String, key: [UInt8]) {
        self.username = username
        self.key = key
    }
}

/// Why a post of receipts is refused, in words that say what to fix.
public struct ReceiptRefusal: Error, Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// No signature, a wrong one, or one made too long ago.
        case unauthenticated
        /// A body that is not the provider's receipts.
        case malformed
    }
    public var kind: Kind
    public var reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
}

extension ReceiptReader {
    public var signsPosts: Bool { true }
    public var settingsTable: String { "" }
    public func screen(headers: [String: String], now: Date) -> ReceiptRefusal? { nil }
    public func authenticate(headers: [String: String], credentials: ReceiptCredentials, now: Date) -> Result<
        String, ReceiptRefusal
    > { .success("") }
}
