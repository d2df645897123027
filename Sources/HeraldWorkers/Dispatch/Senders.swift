import Foundation
import HeraldCore
import HeraldFCM
import HeraldHTTP
import HeraldWebPush
import Logging

/// Each app's clients, made on first use and shared by every sending worker over one HTTP/2
/// client: an FCM client from the app's service-account file (or
/// `GOOGLE_APPLICATION_CREDENTIALS`), and a Web Push client from its VAPID key.
public actor Senders {
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
    private var webPushClients: [String: (file: String, subject: String, client: WebPushClient)] = [:]

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

    /// The Web Push client for an app, or why there is none (a configuration error). A changed
    /// key file or subject in `herald.apps` takes effect at once.
    func webPush(app: String, keyFile: String?, subject: String?) -> Result<WebPushClient, ConfigurationProblem> {
        guard let keyFile, let subject else {
            return .failure(
                ConfigurationProblem(
                    "app \(app) sends to browsers but has no VAPID key: set herald.apps.vapid_key_file and vapid_subject"
                        + " (herald vapid-key makes a key)"))
        }
        if let cached = webPushClients[app], cached.file == keyFile, cached.subject == subject {
            return .success(cached.client)
        }
        do {
            let key = try VAPIDKey.load(file: keyFile, subject: subject)
            let client = WebPushClient(authorizations: VAPIDAuthorizations(key: key), http: http)
            webPushClients[app] = (keyFile, subject, client)
            logger.info(
                "loaded the VAPID key", metadata: ["app": "\(app)", "public_key": "\(key.publicKey)"])
            return .success(client)
        } catch {
            return .failure(ConfigurationProblem("app \(app): \(error)"))
        }
    }

    private var logged: [String: (problem: String, at: ContinuousClock.Instant)] = [:]

    /// Whether to log an app's configuration problem now: once when it appears or changes,
    /// then at most every 5 minutes, never once per message.
    func shouldLog(app: String, scope: ConfigurationScope, problem: String) -> Bool {
        let now = ContinuousClock.now
        let key = "\(app) \(scope.rawValue)"
        if let last = logged[key], last.problem == problem, now - last.at < .seconds(300) { return false }
        logged[key] = (problem, now)
        return true
    }
}

struct ConfigurationProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
