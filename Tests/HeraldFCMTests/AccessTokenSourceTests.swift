import Foundation
import HeraldCore
import HeraldCrypto
import HeraldEmulator
import HeraldFCM
import HeraldHTTP
import HeraldTestSupport
import Testing

@Suite struct AccessTokenSourceTests {
    func fastRetries() -> AccessTokenSource.Configuration {
        var configuration = AccessTokenSource.Configuration()
        configuration.backoff = Backoff(base: .milliseconds(10), cap: .milliseconds(50))
        return configuration
    }

    @Test func manyConcurrentCallersShareOneTokenRequest() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        let source = AccessTokenSource(account: account, http: HTTPClient())
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { try await source.token() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(await emulator.tokenRequests == 1)
        #expect(await source.requestsSent == 1)
    }

    @Test func refreshesBeforeExpiry() async throws {
        let emulator = try await Emulator.start()
        await emulator.setTokenLifetime(seconds: 300)
        let account = try await emulator.makeServiceAccount(projectID: "p")
        // Start in the past: the emulator checks the JWT's iat against the real time.
        let clock = ManualClock(Date().addingTimeInterval(-120))
        let source = AccessTokenSource(account: account, http: HTTPClient(), clock: clock)
        let first = try await source.token()
        // 300 s tokens are refreshed 225 s early: still cached at 74 s, fresh at 76 s.
        clock.advance(by: .seconds(74))
        #expect(try await source.token() == first)
        clock.advance(by: .seconds(2))
        let second = try await source.token()
        #expect(second != first)
        #expect(await emulator.tokenRequests == 2)
    }

    @Test func transientTokenEndpointErrorsAreRetried() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "p")
        await emulator.failTokenRequests(status: 503, count: 2)
        let source = AccessTokenSource(account: account, http: HTTPClient(), configuration: fastRetries())
        _ = try await source.token()
        #expect(await emulator.tokenRequests == 3)
    }

    @Test func invalidGrantIsAConfigurationErrorAndIsNotRetriedInALoop() async throws {
        let emulator = try await Emulator.start()
        // An account the emulator does not trust: its signature cannot verify.
        let stranger = try ServiceAccount.generate(projectID: "p", tokenURI: emulator.tokenURI)
        let source = AccessTokenSource(account: stranger, http: HTTPClient(), configuration: fastRetries())
        for _ in 0..<5 {
            await #expect {
                try await source.token()
            } throws: { error in
                guard case .configuration(let message)? = error as? AccessTokenError else { return false }
                return message.contains("invalid_grant")
            }
        }
        // One request; the other four calls failed fast during the cool-down.
        #expect(await emulator.tokenRequests == 1)
    }

    @Test func tamperedSignatureIsRefused() async throws {
        let emulator = try await Emulator.start()
        let trusted = try await emulator.makeServiceAccount(projectID: "p")
        // Same email and key id, different key: what a leaked-email forgery looks like.
        let forged = ServiceAccount(
            clientEmail: trusted.clientEmail, privateKeyID: trusted.privateKeyID, projectID: "p",
            tokenURI: emulator.tokenURI, key: try CryptoKey.generateRSA())
        let source = AccessTokenSource(account: forged, http: HTTPClient(), configuration: fastRetries())
        await #expect { try await source.token() } throws: { "\($0)".contains("Invalid JWT Signature") }
    }
}
