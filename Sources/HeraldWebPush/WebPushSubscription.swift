import HeraldCrypto

/// Where and how to reach one browser: its push subscription (`PushSubscription.toJSON()`).
public struct WebPushSubscription: Sendable {
    /// The push service's URL for this subscription. As secret as a push token: never logged whole.
    public var endpoint: String
    /// The browser's P-256 public key, 65 bytes uncompressed (`keys.p256dh`).
    public var p256dh: [UInt8]
    /// The subscription's 16-byte authentication secret (`keys.auth`).
    public var auth: [UInt8]

    public init(endpoint: String, p256dh: [UInt8], auth: [UInt8]) throws {
        guard endpoint.hasPrefix("https://"), Self.origin(of: endpoint) != nil else {
            throw WebPushError("a subscription's endpoint must be an https:// URL")
        }
        guard p256dh.count == 65, p256dh.first == 4 else {
            throw WebPushError("keys.p256dh must be a 65-byte uncompressed P-256 point")
        }
        guard auth.count == 16 else { throw WebPushError("keys.auth must be 16 bytes") }
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// The push service's origin (`https://host[:port]`): the VAPID token's audience.
    public var origin: String { Self.origin(of: endpoint)! }

    public static func origin(of url: String) -> String? {
        guard url.hasPrefix("https://") else { return nil }
        let rest = url.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return authority.isEmpty ? nil : "https://" + authority
    }
}

/// A Web Push problem of the sender's own making (a bad key, subscription or payload).
public struct WebPushError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
