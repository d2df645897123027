import Foundation
import HeraldEmulator
import HeraldHTTP
import HeraldTestSupport
import Logging
import Testing

@testable import HeraldWorkers

/// What the daemon's configuration sets for a provider reaches that provider's routes
/// (``Senders/Configuration/set(_:)``).
@Suite struct SendersTests {
    /// An app whose FCM row names no service-account file takes the daemon's
    /// (`GOOGLE_APPLICATION_CREDENTIALS`, through ``FCMSettings``); without it, the app's route
    /// cannot be made and says why.
    @Test func aProvidersDaemonSettingsReachItsRoutes() async throws {
        let emulator = try await Emulator.start()
        let file = try ServiceAccountFile(try await emulator.makeServiceAccount(projectID: "shop-prod"))
        let app = AppSetup(appID: "shop", providerSettings: ["fcm": Data(#"{"project_id": "shop-prod"}"#.utf8)])
        func made(_ configuration: Senders.Configuration) async -> Result<any ProviderRoute, ConfigurationProblem> {
            let senders = Senders(
                http: HTTPClient(configuration: .init()), configuration: configuration, logger: Logger(label: "test"))
            return await senders.route(of: FCMRoute.self, app: app)
        }
        var configured = Senders.Configuration()
        configured.set(FCMSettings(defaultCredentialsFile: file.path, ratePerSecond: 7))
        let route = try await made(configured).get()
        let quota = try #require((route as? FCMRoute)?.quota)
        #expect(await quota.perSecond == 7, "the daemon's rate")
        guard case .failure(let problem) = await made(Senders.Configuration()) else {
            Issue.record("a route made without credentials")
            return
        }
        #expect(problem.description.contains("GOOGLE_APPLICATION_CREDENTIALS is not set"), "\(problem)")
        await emulator.stop()
    }
}
