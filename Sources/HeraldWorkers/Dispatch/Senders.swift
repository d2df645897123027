import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP
import HeraldWebPush
import Logging

/// Each app's clients, made on first use and shared by every sending worker over one HTTP/2
/// client: an FCM client from the app's service-account file (or
/// `GOOGLE_APPLICATION_CREDENTIALS`), a Web Push client from its VAPID key, and an APNs client
/// from its APNs key (one provider token per key, shared by the apps that use it) or push
/// certificate.
public actor Senders {
    public struct Configuration: Sendable {
        public var fcmEndpoint: String = FCMClient.defaultEndpoint
        public var defaultCredentialsFile: String?
        public var ratePerSecond: Double = RateLimiter.defaultRate
        /// APNs' base URL for every app, instead of Apple's production or development servers (a
        /// local stand-in); nil: each app's environment decides.
        public var apnsEndpoint: String?
        public init() {}
    }

    struct Sender {
        var client: FCMClient
        var limiter: RateLimiter
        /// What it was made from: a change in `herald.apps` makes a new one.
        var project: String
        var credentialsFile: String?
    }

    private let http: HTTPClient
    private let configuration: Configuration
    /// What each route has in flight, across the daemon's dispatch loops.
    nonisolated let routeWindows = RouteWindows()
    private let logger: Logger
    private var senders: [String: Sender] = [:]
    private var limiters: [String: RateLimiter] = [:]
    private var webPushClients:
        [String: (file: String, subject: String, policy: WebPushEndpointPolicy, client: WebPushClient)] = [:]
    private var apnsClients: [String: (setup: APNsSetup, client: APNsClient)] = [:]
    private var providerTokens: [String: APNsProviderTokens] = [:]
    /// Certificates' expiry, by app, as read when loaded; `unrecorded` until the worker wrote it
    /// to `herald.apps`.
    private var certificateExpiry: [String: (expiry: Date, unrecorded: Bool)] = [:]
    private var expiryWarned: [String: ContinuousClock.Instant] = [:]

    public init(http: HTTPClient, configuration: Configuration, logger: Logger) {
        self.http = http
        self.configuration = configuration
        self.logger = logger
    }

    /// The sender for an app, or why there is none (a configuration error). A changed project or
    /// credentials file in `herald.apps` takes effect at once.
    func sender(app: String, project: String, credentialsFile: String?) -> Result<Sender, ConfigurationProblem> {
        if let sender = senders[app], sender.project == project, sender.credentialsFile == credentialsFile {
            return .success(sender)
        }
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
            configuration: .init(endpoint: configuration.fcmEndpoint))
        let sender = Sender(client: client, limiter: limiter, project: project, credentialsFile: credentialsFile)
        senders[app] = sender
        logger.info(
            "loaded FCM credentials",
            metadata: ["app": "\(app)", "project": "\(project)", "account": "\(account.clientEmail)"])
        return .success(sender)
    }

    /// The Web Push client for an app, or why there is none (a configuration error). A changed
    /// key file, subject or endpoint policy in `herald.apps` takes effect at once.
    func webPush(app: String, keyFile: String?, subject: String?, policy: WebPushEndpointPolicy) -> Result<
        WebPushClient, ConfigurationProblem
    > {
        guard let keyFile, let subject else {
            return .failure(
                ConfigurationProblem(
                    "app \(app) sends to browsers but has no VAPID key: set herald.apps.vapid_key_file and vapid_subject"
                        + " (herald vapid-key makes a key)"))
        }
        if let cached = webPushClients[app], cached.file == keyFile, cached.subject == subject, cached.policy == policy
        {
            return .success(cached.client)
        }
        do {
            let key = try VAPIDKey.load(file: keyFile, subject: subject)
            let client = WebPushClient(authorizations: VAPIDAuthorizations(key: key), http: http, policy: policy)
            webPushClients[app] = (keyFile, subject, policy, client)
            logger.info(
                "loaded the VAPID key", metadata: ["app": "\(app)", "public_key": "\(key.publicKey)"])
            return .success(client)
        } catch {
            return .failure(ConfigurationProblem("app \(app): \(error)"))
        }
    }

    /// The APNs client for an app, or why there is none (a configuration error). A changed
    /// setup in `herald.apps` takes effect at once.
    func apns(app: String, setup: APNsSetup) -> Result<APNsClient, ConfigurationProblem> {
        if let cached = apnsClients[app], cached.setup == setup { return .success(cached.client) }
        guard setup.bundleID?.isEmpty == false else {
            return .failure(ConfigurationProblem("app \(app) has APNs device tokens but no apns_bundle_id"))
        }
        let authentication: APNsAuthentication
        if let file = setup.keyFile, let teamID = setup.teamID, let keyID = setup.keyID {
            let name = "\(file) \(teamID) \(keyID)"
            if let tokens = providerTokens[name] {
                authentication = .token(tokens)
            } else {
                do {
                    let tokens = try APNsProviderTokens.load(file: file, teamID: teamID, keyID: keyID)
                    providerTokens[name] = tokens
                    authentication = .token(tokens)
                } catch {
                    return .failure(ConfigurationProblem("app \(app): \(error)"))
                }
            }
        } else if let file = setup.certificateFile {
            let expiry: Date
            do {
                expiry = try Certificate.expiry(file: file)
            } catch {
                return .failure(ConfigurationProblem("app \(app): the APNs certificate \(file): \(error)"))
            }
            certificateExpiry[app] = (expiry, true)
            authentication = .certificate(
                ClientCertificate(file: file, format: file.lowercased().hasSuffix(".p12") ? .p12 : .pem))
        } else {
            return .failure(
                ConfigurationProblem(
                    "app \(app) has APNs device tokens but neither an APNs key (apns_key_file, apns_team_id,"
                        + " apns_key_id) nor a certificate (apns_certificate_file)"))
        }
        let client = APNsClient(
            authentication: authentication, environment: APNsEnvironment(rawValue: setup.environment) ?? .production,
            baseURL: configuration.apnsEndpoint, http: http)
        apnsClients[app] = (setup, client)
        logger.info(
            "loaded the APNs setup",
            metadata: [
                "app": "\(app)", "environment": "\(setup.environment)",
                "authentication": "\(setup.keyFile != nil ? "key \(setup.keyID ?? "")" : "certificate")",
            ])
        return .success(client)
    }

    /// An app's certificate expiry: `record` once after each load (for `herald.apps`), and
    /// `warn` at most once a day while it is less than 30 days away.
    func certificateNews(app: String, now: Date) -> (expiry: Date, record: Bool, warn: Bool)? {
        guard let entry = certificateExpiry[app] else { return nil }
        certificateExpiry[app]?.unrecorded = false
        var warn = false
        if entry.expiry.timeIntervalSince(now) < 30 * 86_400 {
            let instant = ContinuousClock.now
            if expiryWarned[app].map({ instant - $0 >= .seconds(86_400) }) ?? true {
                expiryWarned[app] = instant
                warn = true
            }
        }
        return (entry.expiry, entry.unrecorded, warn)
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
