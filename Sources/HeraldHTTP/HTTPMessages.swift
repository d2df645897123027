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

    public init(
        method: String = "POST", url: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        timeout: Duration? = nil, clientCertificate: ClientCertificate? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.clientCertificate = clientCertificate
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

    /// Every header, names lower-cased. Parsed on demand: most responses never need them.
    public var headers: [(name: String, value: String)] {
        String(decoding: rawHeaders, as: UTF8.self).split(separator: "\r\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                line[..<colon].lowercased(),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            )
        }
    }

    /// The first value of a header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
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

/// A request that got no HTTP response: it could not connect, timed out, or the client stopped.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case timeout
        case connection
        case shutdown
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

    public var description: String { "HTTP request failed (\(kind), curl \(curlCode)): \(message)" }
}
