import Foundation
import HeraldCore
import HeraldCrypto
import HeraldHTTP
import Logging
import Metrics

/// OAuth2 access tokens for one service account, obtained with a signed JWT assertion.
///
/// The token is cached and refreshed ahead of expiry (3 min 45 s early, as google-auth does).
/// However many sends wait, one refresh is in flight at a time. Token-endpoint failures that
/// may pass (5xx, 429, network) are retried with backoff; a refusal (`invalid_grant`, a bad
/// key) is a configuration error, and it is remembered for a cool-down so that callers do not
/// hammer the endpoint in a tight loop.
public actor AccessTokenSource {
    public struct Configuration: Sendable {
        /// Refresh this long before the token expires. Default 225 s.
        public var refreshMargin: Duration = .seconds(225)
        /// Token requests per refresh before giving up. Default 4.
        public var attempts: Int = 4
        /// Backoff between those attempts. Default base 500 ms.
        public var backoff = Backoff(base: .milliseconds(500), cap: .seconds(10))
        /// After a configuration error, fail fast for this long before asking again. Default 30 s.
        public var failureCooldown: Duration = .seconds(30)
        public var scope: String = JWT.messagingScope

        public init() {}
    }

    public let account: ServiceAccount
    private let http: HTTPClient
    private let clock: any WallClock
    private let configuration: Configuration
    private let logger: Logger

    private var current: (token: String, refreshAt: Date)?
    private var refreshing: Task<String, any Error>?
    private var lastFailure: (error: AccessTokenError, until: Date)?
    /// Token requests sent so far (for tests and metrics).
    public private(set) var requestsSent = 0

    public init(
        account: ServiceAccount, http: HTTPClient, clock: any WallClock = SystemClock(),
        configuration: Configuration = Configuration(), logger: Logger = Logger(label: "herald.oauth")
    ) {
        self.account = account
        self.http = http
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// A valid access token: the cached one, or a fresh one.
    public func token() async throws -> String {
        if let current, clock.now() < current.refreshAt { return current.token }
        if let lastFailure, clock.now() < lastFailure.until { throw lastFailure.error }
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.fetch() }
        refreshing = task
        defer { refreshing = nil }
        return try await task.value
    }

    /// Called after FCM answered 401 to `token`: the next call fetches a new one.
    public func rejected(_ token: String) {
        if current?.token == token { current = nil }
    }

    private func fetch() async throws -> String {
        var lastError: AccessTokenError?
        for attempt in 1...configuration.attempts {
            if attempt > 1 { try await Task.sleep(for: configuration.backoff.delay(afterAttempts: attempt - 1)) }
            do {
                let (token, lifetime) = try await requestToken()
                // A token shorter-lived than the margin is refreshed at half its life instead.
                let margin = configuration.refreshMargin.seconds
                let refreshIn = lifetime > margin ? lifetime - margin : lifetime / 2
                current = (token, clock.now().addingTimeInterval(refreshIn))
                lastFailure = nil
                Counter(label: "herald_token_refreshes_total", dimensions: [("result", "ok")]).increment()
                logger.debug(
                    "access token refreshed",
                    metadata: ["project": "\(account.projectID)", "expires_in": "\(Int(lifetime))"])
                return token
            } catch let error as AccessTokenError {
                lastError = error
                Counter(label: "herald_token_refreshes_total", dimensions: [("result", "failed")]).increment()
                if case .configuration = error {
                    lastFailure = (error, clock.now().addingTimeInterval(configuration.failureCooldown.seconds))
                    logger.error(
                        "token request refused", metadata: ["project": "\(account.projectID)", "error": "\(error)"])
                    throw error
                }
                logger.warning(
                    "token request failed; retrying",
                    metadata: ["project": "\(account.projectID)", "attempt": "\(attempt)", "error": "\(error)"])
            }
        }
        throw lastError!
    }

    /// One token request: `grant_type=jwt-bearer` with the signed assertion, to `token_uri`.
    private func requestToken() async throws -> (token: String, lifetime: TimeInterval) {
        let assertion: String
        do {
            assertion = try JWT.serviceAccountAssertion(for: account, scope: configuration.scope, issuedAt: clock.now())
        } catch {
            throw AccessTokenError.configuration("cannot sign the token request for \(account.clientEmail): \(error)")
        }
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        requestsSent += 1
        let response: HTTPResponse
        do {
            response = try await http.send(
                HTTPRequest(
                    url: account.tokenURI, headers: [("Content-Type", "application/x-www-form-urlencoded")],
                    body: Array(body.utf8), timeout: .seconds(20)))
        } catch {
            throw AccessTokenError.unavailable("token endpoint unreachable: \(error)")
        }
        let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        switch response.status {
        case 200:
            guard let token = object?["access_token"] as? String, !token.isEmpty else {
                throw AccessTokenError.unavailable("token endpoint answered 200 without an access_token")
            }
            let lifetime = (object?["expires_in"] as? NSNumber)?.doubleValue ?? 3600
            return (token, lifetime)
        case 429, 500...599:
            throw AccessTokenError.unavailable("token endpoint answered \(response.status)")
        default:
            // 400 invalid_grant (bad or revoked key, clock skew), 401 invalid_client, …
            let code = object?["error"] as? String ?? "HTTP \(response.status)"
            let detail = object?["error_description"] as? String ?? ""
            throw AccessTokenError.configuration(
                "token endpoint refused \(account.clientEmail): \(code)\(detail.isEmpty ? "" : " (\(detail))")")
        }
    }
}

/// Why no access token could be had.
public enum AccessTokenError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The credentials are wrong (`invalid_grant`, unknown client, unusable key): fix the configuration.
    case configuration(String)
    /// The token endpoint could not answer now; try later.
    case unavailable(String)

    public var description: String {
        switch self {
        case .configuration(let message): return message
        case .unavailable(let message): return message
        }
    }
}
