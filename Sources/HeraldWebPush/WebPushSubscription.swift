import HeraldCrypto
import HeraldHTTP

/// Where and how to reach one browser: its push subscription (`PushSubscription.toJSON()`).
public struct WebPushSubscription: Sendable {
    /// The push service's URL for this subscription. As secret as a push token: never logged whole.
    public var endpoint: String
    /// The browser's P-256 public key, 65 bytes uncompressed (`keys.p256dh`).
    public var p256dh: [UInt8]
    /// The subscription's 16-byte authentication secret (`keys.auth`).
    public var auth: [UInt8]

    /// Checks the subscription as a browser or a device's registration gave it. The endpoint must
    /// be `https://host[:port]/path`: a host of letters, digits, `-` and `.` (or a bracketed IPv6
    /// address), no user name, and a path without spaces or control characters. Anything else is
    /// not a push service a browser would give, and may be an attempt to reach something else.
    public init(endpoint: String, p256dh: [UInt8], auth: [UInt8]) throws {
        if let problem = Self.endpointProblem(endpoint) { throw WebPushError(problem) }
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

    /// The push service's host, lower-cased, without the port (an IPv6 address in its brackets):
    /// what ``WebPushEndpointPolicy`` matches.
    public var host: String { Self.split(authority: origin.dropFirst("https://".count)).host.lowercased() }

    public static func origin(of url: String) -> String? {
        guard url.hasPrefix("https://") else { return nil }
        let origin = HTTPRequest.origin(of: url)
        return origin.count > "https://".count ? String(origin) : nil
    }

    /// What is wrong with an endpoint, in words that say what to fix; nil when it is fine. The
    /// endpoint itself is never quoted: it is as secret as a token.
    static func endpointProblem(_ endpoint: String) -> String? {
        guard endpoint.hasPrefix("https://") else {
            return "a subscription's endpoint must be an https:// URL (the browser's PushSubscription.endpoint)"
        }
        let rest = endpoint.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let (host, port) = split(authority: authority)
        let hostByte = { (byte: UInt8) -> Bool in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
                return true
            default: return false
            }
        }
        if host.hasPrefix("[") {
            let inside = host.dropFirst().dropLast()
            guard host.hasSuffix("]"), inside.contains(":"),
                inside.utf8.allSatisfy({ $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") || $0.isHexDigit })
            else {
                return "the endpoint's host must be a name or an IPv6 address in brackets ([2001:db8::1])"
            }
        } else if host.isEmpty || !host.utf8.allSatisfy(hostByte) || host.hasPrefix(".") || host.hasPrefix("-") {
            return "the endpoint's host must be a name of letters, digits, '-' and '.' (no user name, no other"
                + " characters), or an IPv6 address in brackets"
        }
        if let port {
            guard !port.isEmpty, port.count <= 5, port.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let number = Int(port), (1...65535).contains(number)
            else { return "the endpoint's port must be a number from 1 to 65535" }
        }
        let path = rest.dropFirst(authority.count)
        guard path.isEmpty || path.hasPrefix("/") else {
            return "the endpoint's path must start with '/'"
        }
        if path.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            return "the endpoint's path must not contain spaces, control characters or other non-ASCII bytes"
                + " (percent-encode them)"
        }
        return nil
    }

    /// `host[:port]` split at the port's colon (the last one outside an IPv6 literal's brackets).
    static func split(authority: Substring) -> (host: Substring, port: Substring?) {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let after = authority[authority.index(after: close)...]
            let host = authority[...close]
            if after.isEmpty { return (host, nil) }
            // "[::1]x" is neither: the caller refuses the host.
            guard after.hasPrefix(":") else { return (authority, nil) }
            return (host, after.dropFirst())
        }
        guard let colon = authority.lastIndex(of: ":") else { return (authority, nil) }
        return (authority[..<colon], authority[authority.index(after: colon)...])
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}

/// Which push services an app's subscribers may be sent to: the hosts of subscription endpoints
/// (`herald.app_webpush.hosts` for browsers), and whether they may resolve to private addresses
/// (`private_addresses`).
public struct WebPushEndpointPolicy: Sendable, Equatable {
    /// Patterns matched case-insensitively against an endpoint's host (its port ignored):
    /// `push.example.com` that host only, `*.example.com` any subdomain of it (not
    /// `example.com` itself), `*` any host.
    public var hosts: [String]
    /// Whether an endpoint may reach a loopback, private, link-local or otherwise non-public
    /// address (for a push service on the operator's own network, or a test stand-in).
    public var privateAddresses: Bool
    /// Where an operator changes it, as reasons name it: `herald.app_webpush` for browsers.
    public var settings: String

    public init(hosts: [String] = ["*"], privateAddresses: Bool = true, settings: String = "herald.app_webpush") {
        self.hosts = hosts
        self.privateAddresses = privateAddresses
        self.settings = settings
    }

    /// Whether `host` (lower-cased or not, without a port) matches one of ``hosts``.
    public func allows(host: String) -> Bool {
        let host = host.lowercased()
        return hosts.contains { pattern in
            let pattern = pattern.lowercased()
            if pattern == "*" { return true }
            if pattern.hasPrefix("*.") {
                let suffix = pattern.dropFirst()  // ".example.com"
                return host.count > suffix.count && host.hasSuffix(suffix)
            }
            return host == pattern
        }
    }
}

/// A Web Push problem of the sender's own making (a bad key, subscription or payload).
public struct WebPushError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
