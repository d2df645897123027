import Foundation
import HeraldAPNs
import HeraldCore
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import Logging

/// An app's setup, as its routes are made from it: its row of each provider's settings
/// (`herald.providers.settings`: `herald.app_fcm`, `herald.app_apns`, …), as JSON, by provider.
public struct AppSetup: Sendable, Equatable {
    public var appID: String
    public var providerSettings: [String: Data] = [:]

    public init(appID: String, providerSettings: [String: Data] = [:]) {
        self.appID = appID
        self.providerSettings = providerSettings
    }
}

/// Each app's routes, made on first use and shared by every sending worker over one HTTP/2
/// client, with what routes share: FCM quotas per project (drawn with the fleet), APNs provider tokens per key.
public actor Senders {
    public struct Configuration: Sendable {
        public var fcmEndpoint: String = FCMClient.defaultEndpoint
        public var defaultCredentialsFile: String?
        /// Each FCM project's sends a second, for the whole fleet.
        public var ratePerSecond: Double = FCMQuota.defaultRate
        /// APNs' base URL for every app, instead of Apple's production or development servers (a
        /// local stand-in); nil: each app's environment decides.
        public var apnsEndpoint: String?
        /// APNs' channel-management base URL for every app (a local stand-in); nil: each app's
        /// environment decides.
        public var apnsChannelsEndpoint: String?
        /// The providers it sends through (tests add their own).
        var providers: [any ProviderRoute.Type] = Providers.compiledIn
        /// Whether the process has run out of file descriptors (tests stand in for it).
        public var descriptorsExhausted: @Sendable () -> Bool = FileDescriptors.areExhausted
        public init() {}
    }

    let http: HTTPClient
    let configuration: Configuration
    /// Its providers, by name.
    nonisolated let providers: [String: any ProviderRoute.Type]
    let logger: Logger
    /// What each route has in flight, across the daemon's dispatch loops.
    nonisolated let routeWindows = RouteWindows()
    /// Each route made, by app and provider, with the settings row it was made from.
    private var routes: [String: (row: Data?, route: any ProviderRoute)] = [:]
    /// Where each FCM project's quota is drawn, shared with every daemon on the database; nil:
    /// this daemon keeps to the rate alone.
    let quotaConnection: PostgresConnection?
    private var quotas: [String: FCMQuota] = [:]
    private var providerTokens: [String: APNsProviderTokens] = [:]
    /// Certificates' expiry, by app, as read when loaded; `unrecorded` until the worker wrote it
    /// to `herald.apps`.
    private var certificateExpiry: [String: (expiry: Date, unrecorded: Bool)] = [:]
    private var expiryWarned: [String: ContinuousClock.Instant] = [:]
    private var logged: [String: (problem: String, at: ContinuousClock.Instant)] = [:]

    public init(
        http: HTTPClient, configuration: Configuration, logger: Logger, quotaConnection: PostgresConnection? = nil
    ) {
        self.http = http
        self.configuration = configuration
        self.providers = Providers.byName(configuration.providers)
        self.logger = logger
        self.quotaConnection = quotaConnection
    }

    /// The app's route of provider `R`, or why there is none. A changed row of the provider's
    /// settings takes effect at once; an unchanged one is not decoded again.
    func route(of provider: any ProviderRoute.Type, app: AppSetup) -> Result<any ProviderRoute, ConfigurationProblem> {
        func made<R: ProviderRoute>(_ type: R.Type) -> Result<any ProviderRoute, ConfigurationProblem> {
            route(type, app: app).map { $0 }
        }
        return made(provider)
    }

    func route<R: ProviderRoute>(_ type: R.Type, app: AppSetup) -> Result<R, ConfigurationProblem> {
        let key = "\(R.self) \(app.appID)"
        let row = app.providerSettings[R.name]
        if let cached = routes[key], cached.row == row, let route = cached.route as? R {
            return .success(route)
        }
        let setup: R.Setup?
        do {
            setup = try row.map { try JSONDecoder().decode(R.Setup.self, from: $0) }
        } catch {
            return .failure(
                ConfigurationProblem("app \(app.appID): its \(R.displayName) settings cannot be read: \(error)"))
        }
        do {
            let route = try R.make(app: app.appID, setup: setup, shared: self)
            routes[key] = (row, route)
            return .success(route)
        } catch {
            // A file that could not be opened because the process ran out of descriptors says
            // nothing about the app's credentials.
            guard configuration.descriptorsExhausted() else { return .failure(error) }
            return .failure(
                ConfigurationProblem(
                    "Herald is out of file descriptors (EMFILE/ENFILE), not app \(app.appID)'s setup: raise LimitNOFILE (\(error))",
                    herald: true))
        }
    }

    /// The quota of an FCM project, shared by the apps that send through it (and the fleet).
    func quota(project: String) -> FCMQuota {
        if let quota = quotas[project] { return quota }
        let quota = FCMQuota(
            project: project, perSecond: configuration.ratePerSecond, connection: quotaConnection, logger: logger)
        quotas[project] = quota
        return quota
    }

    /// The provider tokens of an APNs key, shared by the apps that use it.
    func providerTokens(file: String, teamID: String, keyID: String) throws -> APNsProviderTokens {
        let name = "\(file) \(teamID) \(keyID)"
        if let tokens = providerTokens[name] { return tokens }
        let tokens = try APNsProviderTokens.load(file: file, teamID: teamID, keyID: keyID)
        providerTokens[name] = tokens
        return tokens
    }

    /// A push certificate was loaded: its expiry is news for ``certificateNews(app:now:)``.
    func noteCertificate(app: String, expiry: Date) { certificateExpiry[app] = (expiry, true) }

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
    /// Herald's own (out of file descriptors), not the app's: never recorded in
    /// `herald.app_config_problems`.
    var herald = false
    init(_ description: String, herald: Bool = false) {
        self.description = description
        self.herald = herald
    }
}
