import Foundation
import HeraldCore
import Logging
import Metrics

/// OAuth2 access tokens from a token endpoint, however a provider asks for them (FCM's
/// service-account JWT, Huawei's client credentials): `request` asks once.
///
/// The token is cached and refreshed ahead of expiry (3 min 45 s early, as google-auth does).
/// However many sends wait, one refresh is in flight at a time. Token-endpoint failures that
/// may pass (5xx, 429, network) are retried with backoff; a refusal (`invalid_grant`, a bad
/// key) is a configuration error, and it is remembered for a cool-down so that callers do not
/// hammer the endpoint in a tight loop.
public actor AccessTokens {
    /// One token request: the token and its lifetime in seconds, or why there is none.
    public typealias Request = @Sendable () async throws(AccessTokenError) -> (token: String, lifetime: TimeInterval)

    public struct Configuration: Sendable {
        /// Refresh this long before the token expires. Default 225 s.
        public var refreshMargin: Duration = .seconds(225)
        /// Token requests per refresh before giving up. Default 4.
        public var attempts: Int = 4
        /// Backoff between those attempts. Default base 500 ms.
        public var backoff = Backoff(base: .milliseconds(500), cap: .seconds(10))
        /// After a configuration error, fail fast for this long before asking again. Default 30 s.
        public var failureCooldown: Duration = .seconds(30)

        public init() {}
    }

    /// Whose tokens, as logs name them (an account's email, an app's client id).
    public let name: String
    private let request: Request
    private let clock: any WallClock
    private let configuration: Configuration
    private let logger: Logger

    private var current: (token: String, refreshAt: Date)?
    private var refreshing: Task<String, any Error>?
    private var lastFailure: (error: AccessTokenError, until: Date)?
    /// Token requests sent so far (for tests and metrics).
    public private(set) var requestsSent = 0

    public init(
        name: String, clock: any WallClock = SystemClock(), configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "herald.oauth"), request: @escaping Request
    ) {
        self.name = name
        self.request = request
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

    /// Called after the provider refused `token` (FCM's 401): the next call fetches a new one.
    public func rejected(_ token: String) {
        if current?.token == token { current = nil }
    }

    /// Answers for `count` requests sent with a token: `send` sends those of the indices it is
    /// given, in their order, with the token it is given; the ones whose answer the provider
    /// `refused` for the token are sent once more with a fresh one. Without a token, a request's
    /// answer is `noToken`'s.
    public nonisolated func sending<Answer: Sendable>(
        _ count: Int, noToken: (AccessTokenError) -> Answer, refused: (Answer) -> Bool,
        send: (_ token: String, _ indices: [Int]) async -> [Answer]
    ) async -> [Answer] {
        var answers = [Answer?](repeating: nil, count: count)
        var pending = Array(0..<count)
        for attempt in 0..<2 where !pending.isEmpty {
            let token: String
            do {
                token = try await self.token()
            } catch {
                let reason = error as? AccessTokenError ?? .unavailable("\(error)")
                for index in pending { answers[index] = noToken(reason) }
                break
            }
            var again: [Int] = []
            for (index, answer) in zip(pending, await send(token, pending)) {
                if attempt == 0 && refused(answer) { again.append(index) } else { answers[index] = answer }
            }
            if !again.isEmpty { await rejected(token) }
            pending = again
        }
        return answers.map { $0! }
    }

    private func fetch() async throws -> String {
        var lastError: AccessTokenError?
        for attempt in 1...configuration.attempts {
            if attempt > 1 { try await Task.sleep(for: configuration.backoff.delay(afterAttempts: attempt - 1)) }
            do {
                requestsSent += 1
                let (token, lifetime) = try await request()
                // A token shorter-lived than the margin is refreshed at half its life instead.
                let margin = configuration.refreshMargin.seconds
                let refreshIn = lifetime > margin ? lifetime - margin : lifetime / 2
                current = (token, clock.now().addingTimeInterval(refreshIn))
                lastFailure = nil
                Counter(label: "herald_token_refreshes_total", dimensions: [("result", "ok")]).increment()
                logger.debug(
                    "access token refreshed",
                    metadata: ["account": "\(name)", "expires_in": "\(Int(lifetime))"])
                return token
            } catch {
                lastError = error
                Counter(label: "herald_token_refreshes_total", dimensions: [("result", "failed")]).increment()
                if case .configuration = error {
                    lastFailure = (error, clock.now().addingTimeInterval(configuration.failureCooldown.seconds))
                    logger.error(
                        "token request refused", metadata: ["account": "\(name)", "error": "\(error)"])
                    throw error
                }
                logger.warning(
                    "token request failed; retrying",
                    metadata: ["account": "\(name)", "attempt": "\(attempt)", "error": "\(error)"])
            }
        }
        throw lastError!
    }

    /// An OAuth2 token request (RFC 6749, section 4): `form` posted to `url`, its answer read. A
    /// refusal (a 4xx: a bad or revoked key, an unknown client, a wrong secret) is a configuration
    /// error, in `refusing`'s words and the endpoint's (`error` is a string at Google, a number at
    /// Huawei); a 429, a 5xx or no answer may pass.
    public static func post(form: String, to url: String, http: HTTPClient, refusing: String)
        async throws(AccessTokenError) -> (token: String, lifetime: TimeInterval)
    {
        let response: HTTPResponse
        let request = HTTPRequest(
            url: url, headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8),
            timeout: .seconds(20))
        switch await http.send([request])[0] {
        case .success(let answered): response = answered
        case .failure(let error): throw AccessTokenError.unavailable(error.reason(sendingTo: "token endpoint"))
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
            let code = object?["error"].map { "\($0)" } ?? "HTTP \(response.status)"
            let detail = [object?["sub_error"].map { "sub_error \($0)" }, object?["error_description"] as? String]
                .compactMap { $0 }.joined(separator: ", ")
            throw AccessTokenError.configuration("\(refusing): \(code)\(detail.isEmpty ? "" : " (\(detail))")")
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
