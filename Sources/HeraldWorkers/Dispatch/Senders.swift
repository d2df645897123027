import Foundation
import HeraldCore
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
/// client, with what a provider's routes share across apps (``shared(_:make:)``).
public actor Senders {
    public struct Configuration: Sendable {
        /// What the daemon's configuration sets for a provider (``FCMSettings``), by its type:
        /// each provider reads its own.
        private var providerSettings: [ObjectIdentifier: any Sendable] = [:]
        /// A base URL a provider sends to instead of its own servers (a local stand-in), by the
        /// provider's name (`herald.providers`), for every app; a provider with more than one API
        /// names the others itself (``APNsRoute/channelsEndpoint``). None: the provider's own,
        /// and for APNs each app's environment decides.
        public var endpoints: [String: String] = [:]
        /// The providers it sends through (tests add their own).
        var providers: [any ProviderRoute.Type] = Providers.compiledIn
        /// The settings that are on among those that turn a provider on (`HERALD_UNIFIEDPUSH`).
        public var turnedOn: Set<String> = []
        /// Whether the process has run out of file descriptors (tests stand in for it).
        public var descriptorsExhausted: @Sendable () -> Bool = FileDescriptors.areExhausted
        public init() {}

        public mutating func set<Settings: Sendable>(_ settings: Settings) {
            providerSettings[ObjectIdentifier(Settings.self)] = settings
        }

        func settings<Settings: Sendable>(_ type: Settings.Type) -> Settings? {
            providerSettings[ObjectIdentifier(type)] as? Settings
        }
    }

    /// The names of the providers compiled in (`herald.providers.provider`).
    public static let providerNames = Set(Providers.compiledIn.map { $0.name })

    let http: HTTPClient
    let configuration: Configuration
    /// Its providers, by name.
    nonisolated let providers: [String: any ProviderRoute.Type]
    let logger: Logger
    /// What each route has in flight, across the daemon's dispatch loops.
    nonisolated let routeWindows: RouteWindows
    /// The elapsed time its routes' windows and quotas count on.
    nonisolated let clock: any MonotonicClock
    /// Each route made, by app and provider, with the settings row it was made from.
    private var routes: [String: (row: Data?, route: any ProviderRoute)] = [:]
    /// Where a provider's quotas shared with every daemon on the database are drawn (an FCM
    /// project's); nil: this daemon keeps to the rate alone.
    let quotaConnection: PostgresConnection?
    /// What providers share, by their keys.
    private var sharedByKey: [String: any Sendable] = [:]
    private var logged: [String: (problem: String, at: ContinuousClock.Instant)] = [:]

    public init(
        http: HTTPClient, configuration: Configuration, logger: Logger, quotaConnection: PostgresConnection? = nil,
        clock: any MonotonicClock = ContinuousClock()
    ) {
        self.http = http
        self.clock = clock
        routeWindows = RouteWindows(clock: clock)
        self.configuration = configuration
        self.providers = Providers.byName(
            configuration.providers.filter { $0.turnedOnBy.map(configuration.turnedOn.contains) ?? true })
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

    /// What a provider's routes share across apps, by a key the provider chooses (an FCM
    /// project's quota, an APNs key's provider tokens): made on first use, then kept.
    func shared<T: Sendable>(_ key: String, make: () throws -> T) rethrows -> T {
        if let value = sharedByKey[key] as? T { return value }
        let value = try make()
        sharedByKey[key] = value
        return value
    }

    /// Whether to log an app's configuration problem now: once when it appears or changes,
    /// then at most every 5 minutes, never once per message.
    func shouldLog(app: String, scope: ConfigurationScope, problem: String) -> Bool {
        let now = clock.now
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

extension ConfigurationProblem {
    /// A secret an app's settings name by its file (a client secret, an AppSecret), which never
    /// enters the database: the file's text without its surrounding white space, or why there is
    /// none (`what` names it: "the Huawei client secret file").
    static func secret(inFile path: String, app: String, what: String) throws(ConfigurationProblem) -> String {
        let secret: String
        do {
            secret = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            throw ConfigurationProblem("app \(app): \(what) \(path) cannot be read: \(error)")
        }
        guard !secret.isEmpty else { throw ConfigurationProblem("app \(app): \(what) \(path) is empty") }
        return secret
    }
}
