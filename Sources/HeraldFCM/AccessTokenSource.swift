import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Logging

/// FCM's OAuth2 access tokens for one service account, obtained with a signed JWT assertion
/// (`grant_type=jwt-bearer`) from its `token_uri`, cached and refreshed as ``AccessTokens``
/// keeps every provider's.
public struct AccessTokenSource: Sendable {
    public typealias Configuration = AccessTokens.Configuration

    public let account: ServiceAccount
    let tokens: AccessTokens

    public init(
        account: ServiceAccount, http: HTTPClient, clock: any WallClock = SystemClock(),
        configuration: Configuration = Configuration(), logger: Logger = Logger(label: "herald.oauth"),
        scope: String = JWT.messagingScope
    ) {
        self.account = account
        tokens = AccessTokens(name: account.clientEmail, clock: clock, configuration: configuration, logger: logger) {
            () async throws(AccessTokenError) in
            try await Self.request(account: account, scope: scope, http: http, now: clock.now())
        }
    }

    /// A valid access token: the cached one, or a fresh one.
    public func token() async throws -> String { try await tokens.token() }

    /// Called after FCM answered 401 to `token`: the next call fetches a new one.
    public func rejected(_ token: String) async { await tokens.rejected(token) }

    /// Token requests sent so far (for tests and metrics).
    public var requestsSent: Int { get async { await tokens.requestsSent } }

    /// One token request: `grant_type=jwt-bearer` with the signed assertion, to `token_uri`.
    static func request(account: ServiceAccount, scope: String, http: HTTPClient, now: Date)
        async throws(AccessTokenError) -> (token: String, lifetime: TimeInterval)
    {
        let assertion: String
        do {
            assertion = try JWT.serviceAccountAssertion(for: account, scope: scope, issuedAt: now)
        } catch {
            throw AccessTokenError.configuration("cannot sign the token request for \(account.clientEmail): \(error)")
        }
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        return try await AccessTokens.post(
            form: body, to: account.tokenURI, http: http, refusing: "token endpoint refused \(account.clientEmail)")
    }
}
