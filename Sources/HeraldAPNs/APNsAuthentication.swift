import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP

/// How a provider proves itself to APNs.
public enum APNsAuthentication: Sendable {
    /// Token-based: a JWT signed with the team's .p8 key, shared by every app that uses the key.
    case token(APNsProviderTokens)
    /// Certificate-based: the app's push certificate as the TLS client certificate.
    case certificate(ClientCertificate)
}

/// The provider authentication tokens of one APNs signing key (.p8): an ES256 JWT with the key
/// id (`kid`), the team id (`iss`) and when it was made (`iat`). One token serves every
/// request and every app that uses the key. It is replaced after 50 minutes: APNs refuses a
/// token older than an hour (403 ExpiredProviderToken) and one replaced more often than every
/// 20 minutes (429 TooManyProviderTokenUpdates).
public actor APNsProviderTokens {
    public static let refreshAfter: TimeInterval = 50 * 60
    /// The least age at which a token may be replaced early, on APNs' word that it expired.
    public static let minimumAge: TimeInterval = 20 * 60

    public let teamID: String
    public let keyID: String
    private let key: CryptoKey
    private let clock: any WallClock
    private var current: (token: String, issuedAt: Date)?
    /// Tokens signed so far (for tests).
    public private(set) var signed = 0

    public init(teamID: String, keyID: String, key: CryptoKey, clock: any WallClock = SystemClock()) throws {
        guard key.kind == .ecP256 else {
            throw APNsError("the APNs key \(keyID) is not an EC P-256 private key (a .p8 from Apple is)")
        }
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.clock = clock
    }

    /// Loads a .p8 file (PEM PKCS#8).
    public static func load(file: String, teamID: String, keyID: String) throws -> APNsProviderTokens {
        do {
            return try APNsProviderTokens(
                teamID: teamID, keyID: keyID, key: try CryptoKey(privateKeyFile: file, what: "APNs key"))
        } catch let error as CryptoError {
            throw APNsError(error.description)
        }
    }

    /// The token to send now.
    public func token() throws -> String {
        let now = clock.now()
        if let current, now.timeIntervalSince(current.issuedAt) < Self.refreshAfter { return current.token }
        return try sign(at: now)
    }

    /// APNs called `token` expired: a new one, unless `token` is no longer the current one
    /// (another request already replaced it) or the current one is too young to replace.
    public func expired(_ token: String) throws -> String {
        guard let current, current.token == token,
            clock.now().timeIntervalSince(current.issuedAt) >= Self.minimumAge
        else { return try self.token() }
        return try sign(at: clock.now())
    }

    private func sign(at now: Date) throws -> String {
        let token = try JWT.signES256(
            header: .object([("alg", .string("ES256")), ("kid", .string(keyID))]),
            claims: .object([("iss", .string(teamID)), ("iat", .int(Int(now.timeIntervalSince1970)))]),
            key: key)
        current = (token, now)
        signed += 1
        return token
    }
}

/// An APNs setup problem of the provider's own making (a key, certificate or bundle id).
public struct APNsError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension APNsAuthentication {
    /// The provider token to send now (token-based); nil over a certificate.
    func bearer() async throws -> String? {
        guard case .token(let tokens) = self else { return nil }
        return try await tokens.token()
    }

    /// APNs called `bearer` expired: the next request gets a new one.
    func expired(_ bearer: String?) async {
        if case .token(let tokens) = self, let bearer { _ = try? await tokens.expired(bearer) }
    }

    /// The push certificate to present (certificate-based); nil with a token.
    var clientCertificate: ClientCertificate? {
        if case .certificate(let certificate) = self { certificate } else { nil }
    }
}

/// The `reason` of an APNs refusal, as Apple's documentation names it ("Handling notification
/// responses from APNs"), compared whole, never searched for in text.
public struct APNsReason: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }

    public static let badDeviceToken: Self = "BadDeviceToken"
    public static let deviceTokenNotForTopic: Self = "DeviceTokenNotForTopic"
    public static let expiredProviderToken: Self = "ExpiredProviderToken"
    public static let badTopic: Self = "BadTopic"
    public static let missingTopic: Self = "MissingTopic"
    public static let topicDisallowed: Self = "TopicDisallowed"
    public static let invalidPushType: Self = "InvalidPushType"
    public static let topicMismatch: Self = "TopicMismatch"
    public static let channelNotRegistered: Self = "ChannelNotRegistered"
    public static let badChannelID: Self = "BadChannelId"
}

/// APNs' answer to a request that failed: its body, Apple's `reason`, and how Herald words it.
struct APNsRefusal {
    var body: [String: Any]?
    var reason: APNsReason
    var described: String

    init(_ response: HTTPResponse) {
        body = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        reason = APNsReason(rawValue: body?["reason"] as? String ?? "")
        described =
            "APNs answered \(response.status) \(reason.rawValue.isEmpty ? String(response.bodyText.prefix(100)) : reason.rawValue)"
    }
}
