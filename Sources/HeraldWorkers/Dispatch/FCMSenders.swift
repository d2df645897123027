import Foundation
import HeraldFCM
import HeraldHTTP
import Logging

/// One FCM client per app, made on first use from the app's service-account file (or
/// `GOOGLE_APPLICATION_CREDENTIALS`), all sharing one HTTP/2 client.
public actor FCMSenders {
    public struct Configuration: Sendable {
        public var endpoint: String = FCMClient.defaultEndpoint
        public var defaultCredentialsFile: String?
        public var ratePerSecond: Double = RateLimiter.defaultRate
        public init() {}
    }

    struct Sender {
        var client: FCMClient
        var limiter: RateLimiter
    }

    private let http: HTTPClient
    private let configuration: Configuration
    private let logger: Logger
    private var senders: [String: Sender] = [:]
    private var limiters: [String: RateLimiter] = [:]

    public init(http: HTTPClient, configuration: Configuration, logger: Logger) {
        self.http = http
        self.configuration = configuration
        self.logger = logger
    }

    /// The sender for an app, or why there is none (a configuration error).
    func sender(app: String, project: String, credentialsFile: String?) -> Result<Sender, ConfigurationProblem> {
        if let sender = senders[app] { return .success(sender) }
        guard let path = credentialsFile ?? configuration.defaultCredentialsFile else {
            return .failure(
                ConfigurationProblem(
                    "app \(app) has no credentials_file and GOOGLE_APPLICATION_CREDENTIALS is not set"))
        }
        let account: ServiceAccount
        do {
            account = try ServiceAccount.load(file: path)
        } catch {
            return .failure(ConfigurationProblem("app \(app): \(error)"))
        }
        let limiter = limiters[project] ?? RateLimiter(perSecond: configuration.ratePerSecond)
        limiters[project] = limiter
        let client = FCMClient(
            projectID: project, tokens: AccessTokenSource(account: account, http: http, logger: logger), http: http,
            configuration: .init(endpoint: configuration.endpoint))
        let sender = Sender(client: client, limiter: limiter)
        senders[app] = sender
        logger.info(
            "loaded FCM credentials",
            metadata: ["app": "\(app)", "project": "\(project)", "account": "\(account.clientEmail)"])
        return .success(sender)
    }

    private var logged: [String: (problem: String, at: ContinuousClock.Instant)] = [:]

    /// Whether to log an app's configuration problem now: once when it appears or changes,
    /// then at most every 5 minutes, never once per message.
    func shouldLog(app: String, problem: String) -> Bool {
        let now = ContinuousClock.now
        if let last = logged[app], last.problem == problem, now - last.at < .seconds(300) { return false }
        logged[app] = (problem, now)
        return true
    }
}

struct ConfigurationProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
