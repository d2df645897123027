import CAddress
import CCurl
import Foundation

/// A TLS client certificate and its private key, in one file (APNs' certificate-based
/// authentication). libcurl opens a connection of its own for each certificate.
public struct ClientCertificate: Sendable, Equatable {
    public enum Format: String, Sendable { case pem = "PEM", p12 = "P12" }
    public var file: String
    public var format: Format
    /// The file's passphrase, if it has one. Never logged.
    public var password: String?

    public init(file: String, format: Format, password: String? = nil) {
        self.file = file
        self.format = format
        self.password = password
    }
}

/// An `application/x-www-form-urlencoded` body (the HTML form encoding OAuth 2.0's token
/// requests and some providers' sends take): each name and value escaped but for letters,
/// digits and `-._~`, joined by `=` and `&`.
public func formEncoded(_ fields: [(String, String)]) -> String {
    let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    func escaped(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "" }
    return fields.map { "\(escaped($0.0))=\(escaped($0.1))" }.joined(separator: "&")
}

/// A request for ``HTTPClient``.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The whole exchange's time limit; nil means the client's default.
    public var timeout: Duration?
    /// The certificate to present to the server, if it asks for one.
    public var clientCertificate: ClientCertificate?
    /// Whether the request may connect to a loopback, private, link-local, carrier-grade NAT,
    /// multicast or unspecified address (IPv4, IPv6, and IPv4-mapped IPv6). False for a URL that
    /// someone else chose (a browser's push subscription): the address libcurl actually
    /// connects to, after DNS, is checked, and a refusal fails with ``HTTPClientError/Kind/refusedAddress``.
    /// Default true: FCM, APNs and the operator's own endpoints are trusted.
    public var allowPrivateAddresses: Bool

    public init(
        method: String = "POST", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        timeout: Duration? = nil, clientCertificate: ClientCertificate? = nil, allowPrivateAddresses: Bool = true
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.clientCertificate = clientCertificate
        self.allowPrivateAddresses = allowPrivateAddresses
    }

    /// Why this request must not be handed to libcurl, or nil when it may.
    ///
    /// Header values and URLs carry what producers and devices chose (a collapse key, a
    /// subscription's endpoint). A CR or LF in one would end the header and start another (a
    /// second `apns-topic`, say), so a request carrying one is refused whole, never cleaned up:
    /// what the sender meant cannot be guessed. Messages name the header, never its value,
    /// which may be secret.
    var invalidity: HTTPClientError? {
        func invalid(_ message: String) -> HTTPClientError {
            HTTPClientError(kind: .invalidRequest, message: "request refused before sending: \(message)")
        }
        if !Self.isToken(method) { return invalid("the method \(Self.quoted(method)) is not an RFC 9110 token") }
        let scheme = url.prefix { $0 != ":" }.lowercased()
        guard scheme == "https" || scheme == "http", url.dropFirst(scheme.count).hasPrefix("://") else {
            return invalid("the URL is not an http:// or https:// URL")
        }
        if let index = url.utf8.firstIndex(where: { $0 < 0x21 || $0 == 0x7F }) {
            return invalid("the URL contains \(Self.describe(url.utf8[index])); it must be percent-encoded or removed")
        }
        for header in headers {
            guard Self.isToken(header.name) else {
                return invalid(
                    "the header name \(Self.quoted(header.name)) is not an RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~)"
                )
            }
            // RFC 9110 §5.5: field values are visible characters, spaces, tabs and obs-text (bytes
            // over 0x7F); CR, LF and NUL are never allowed, nor any other control character here.
            if let index = header.value.utf8.firstIndex(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                let offset = header.value.utf8.distance(from: header.value.utf8.startIndex, to: index)
                return invalid(
                    "the value of header \(header.name) contains \(Self.describe(header.value.utf8[index])) at byte \(offset)"
                        + ", which could end the header and start another")
            }
        }
        return nil
    }

    /// A URL's `scheme://host[:port]`: what the client queues transfers by, and dispatch its
    /// browsers' routes. Read over the URL's bytes: it is asked for every request.
    public static func origin(of url: String) -> Substring {
        let bytes = url.utf8
        var search = bytes.startIndex
        while let colon = bytes[search...].firstIndex(of: UInt8(ascii: ":")) {
            if bytes[colon...].starts(with: "://".utf8) {
                let authority = bytes.index(colon, offsetBy: 3)
                let end = bytes[authority...].firstIndex {
                    $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
                }
                return url[..<(end ?? bytes.endIndex)]
            }
            search = bytes.index(after: colon)
        }
        return url[...]
    }

    /// RFC 9110's token: one or more of `tchar`.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    return true
                default:
                    return tokenSymbols.contains(byte)
                }
            }
    }

    /// The symbols `tchar` allows beside letters and digits (made once, not per byte).
    private static let tokenSymbols = Set("!#$%&'*+-.^_`|~".utf8)

    /// A header name or method for a message: escaped, and short.
    static func quoted(_ text: String) -> String {
        let escaped = text.unicodeScalars.prefix(40).map { $0.escaped(asASCII: true) }.joined()
        return "\"\(escaped)\(text.unicodeScalars.count > 40 ? "…" : "")\""
    }

    static func describe(_ byte: UInt8) -> String {
        switch byte {
        case 0x0D: "a carriage return (CR)"
        case 0x0A: "a line feed (LF)"
        case 0x00: "a NUL byte"
        case 0x20: "a space"
        default: "the control character 0x\(String(byte, radix: 16, uppercase: true))"
        }
    }
}

/// A response from ``HTTPClient``.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// The raw header block of the final response (`Name: value` lines).
    let rawHeaders: [UInt8]
    public var body: [UInt8]
    /// 1 for HTTP/1.x, 2 for HTTP/2.
    public var httpVersion: Int
    /// Connections this request had to open (0 when it reused or multiplexed onto one).
    public var newConnections: Int

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], httpVersion: Int = 2) {
        self.status = status
        self.rawHeaders = Array(headers.map { "\($0.0): \($0.1)\r\n" }.joined().utf8)
        self.body = body
        self.httpVersion = httpVersion
        self.newConnections = 0
    }

    init(status: Int, rawHeaders: [UInt8], body: [UInt8], httpVersion: Int, newConnections: Int) {
        self.status = status
        self.rawHeaders = rawHeaders
        self.body = body
        self.httpVersion = httpVersion
        self.newConnections = newConnections
    }

    /// The first value of a header, by case-insensitive name, without its surrounding spaces.
    ///
    /// Read from the raw block on each call, byte by byte, with nothing made but the value: a
    /// classifier asks for one or two headers of every answer (APNs' `apns-id` and
    /// `apns-unique-id`), and splitting the block into strings first cost more than the rest
    /// of reading an APNs answer.
    public func header(_ name: String) -> String? {
        rawHeaders.withUnsafeBufferPointer { block in
            var lineStart = 0
            while lineStart < block.count {
                let lineEnd = block[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? block.count
                if let value = Self.value(of: name, in: block[lineStart..<lineEnd]) { return value }
                lineStart = lineEnd + 1
            }
            return nil
        }
    }

    /// The value on a `Name: value` line when its name is `name` (ASCII case-insensitive), or nil.
    private static func value(of name: String, in line: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        var index = line.startIndex
        for wanted in name.utf8 {
            guard index < line.endIndex, lowercased(line[index]) == lowercased(wanted) else { return nil }
            index += 1
        }
        guard index < line.endIndex, line[index] == UInt8(ascii: ":") else { return nil }
        // RFC 9110's optional whitespace around the value, and the line's CR.
        let space: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
        var start = index + 1
        var end = line.endIndex
        while start < end, space(line[start]) { start += 1 }
        while end > start, space(line[end - 1]) { end -= 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// How long the server asked to wait (`Retry-After`), if it did.
    public func retryAfter(now: Date) -> Duration? {
        header("retry-after").flatMap { Self.parseRetryAfter($0, now: now) }
    }

    /// `Retry-After` as seconds (`120`) or an HTTP-date (`Wed, 21 Oct 2015 07:28:00 GMT`).
    public static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(text) { return seconds >= 0 ? .seconds(seconds) : nil }
        guard let date = parseHTTPDate(text) else { return nil }
        return .milliseconds(Int64(max(0, date.timeIntervalSince(now)) * 1000))
    }

    /// IMF-fixdate, the form RFC 9110 requires senders to use.
    static func parseHTTPDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]),
            let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3])
        else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3 else { return nil }
        var components = DateComponents()
        (components.year, components.month, components.day) = (year, month + 1, day)
        (components.hour, components.minute, components.second) = (time[0], time[1], time[2])
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        return calendar.date(from: components)
    }
}

/// A request that got no HTTP response: it could not connect, timed out, was refused before
/// sending, or the client stopped.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case timeout
        case connection
        case shutdown
        /// The request itself is unsafe and was never handed to libcurl: a CR, LF, NUL or other
        /// control character in its URL or a header, a header name that is not a token, or a URL
        /// that is not http(s). Sending it again cannot help.
        case invalidRequest
        /// Every address the URL's host resolved to is one the request may not reach (loopback,
        /// private, link-local, …: see ``HTTPRequest/allowPrivateAddresses``). Nothing was sent.
        case refusedAddress
        /// The server was reached and broke HTTP's rules (a malformed response, a flood of
        /// frames, garbage), or sent more than a response may bring (64 KiB of header fields,
        /// 1 MiB of body).
        case serverMisbehaved
        case other
    }

    public var kind: Kind
    /// libcurl's error code (`CURLcode`), when it came from libcurl.
    public var curlCode: Int
    public var message: String

    public init(kind: Kind, curlCode: Int = 0, message: String) {
        self.kind = kind
        self.curlCode = curlCode
        self.message = message
    }

    public var description: String {
        "HTTP request failed (\(kind)\(curlCode == 0 ? "" : ", curl \(curlCode)")): \(message)"
    }

    /// Why a request to `service` ("FCM", "push service", …) got no response to judge, as a
    /// delivery's reason: the service could not be reached, did not answer in time, or
    /// misbehaved; or the request was never sent, or abandoned.
    public func reason(sendingTo service: String) -> String {
        switch kind {
        case .timeout: "\(service) did not answer in time: \(message)"
        case .serverMisbehaved: "\(service) misbehaved: \(message)"
        case .invalidRequest: "\(service) request not sent: \(message)"
        case .shutdown: "\(service) request abandoned: \(message)"
        case .connection, .refusedAddress, .other: "\(service) unreachable: \(message)"
        }
    }

    /// A request none of whose host's addresses it could connect to, some of them refused: the
    /// last refused is of `kind` (`HERALD_ADDRESS_…`) and reads `address`. `curlCode`: libcurl's
    /// code, when libcurl made the connections.
    static func refusedAddress(kind: Int32, address: String, curlCode: Int = 0) -> HTTPClientError {
        let what: String
        switch kind {
        case HERALD_ADDRESS_LOOPBACK: what = "a loopback address"
        case HERALD_ADDRESS_PRIVATE: what = "a private address"
        case HERALD_ADDRESS_LINK_LOCAL: what = "a link-local address (such as the cloud metadata service)"
        case HERALD_ADDRESS_UNSPECIFIED: what = "an unspecified address"
        case HERALD_ADDRESS_SHARED: what = "a carrier-grade NAT address (100.64.0.0/10)"
        case HERALD_ADDRESS_MULTICAST: what = "a multicast address"
        default: what = "a reserved address"
        }
        return HTTPClientError(
            kind: .refusedAddress, curlCode: curlCode,
            message:
                "refused to connect to \(address.isEmpty ? "the server" : address): \(what), which this request may not reach"
        )
    }
}

/// What kind of address an IP literal is, as the connection check judges it (for tests and
/// messages): "public", "loopback", "private", "link-local", "unspecified", "shared",
/// "multicast" or "reserved"; nil when `text` is not an IPv4 or IPv6 address.
func addressKind(_ text: String) -> String? {
    var v4 = in_addr()
    var v6 = in6_addr()
    let kind: Int32
    if inet_pton(AF_INET, text, &v4) == 1 {
        kind = herald_classify_ipv4(UInt32(bigEndian: v4.s_addr))
    } else if inet_pton(AF_INET6, text, &v6) == 1 {
        kind = withUnsafeBytes(of: &v6) { herald_classify_ipv6($0.bindMemory(to: UInt8.self).baseAddress!) }
    } else {
        return nil
    }
    return ["public", "loopback", "private", "link-local", "unspecified", "shared", "multicast", "reserved"][Int(kind)]
}
