import Foundation
import HeraldCore
import HeraldHTTP
import Logging

/// Sends messages to one Firebase project through FCM HTTP v1, and reports a typed outcome
/// for each.
///
/// A batch goes out concurrently over the shared HTTP/2 client with one access token. If
/// FCM answers 401 because the token was refused, the client refreshes it and resends those
/// messages, twice at most, as google-auth does.
public struct FCMClient: Sendable {
    public struct Configuration: Sendable {
        /// FCM's base URL; override it for the emulator.
        public var endpoint: String = FCMClient.defaultEndpoint
        /// Time limit for one send. Default 10 s.
        public var timeout: Duration = .seconds(10)
        public init(endpoint: String = FCMClient.defaultEndpoint, timeout: Duration = .seconds(10)) {
            self.endpoint = endpoint
            self.timeout = timeout
        }
    }

    public static let defaultEndpoint = "https://fcm.googleapis.com"

    public let projectID: String
    public let tokens: AccessTokenSource
    private let http: HTTPClient
    private let configuration: Configuration
    private let clock: any WallClock
    private let sendURL: String

    /// A client for `projectID` (default: the service account's own project).
    public init(
        projectID: String? = nil, tokens: AccessTokenSource, http: HTTPClient,
        configuration: Configuration = Configuration(), clock: any WallClock = SystemClock()
    ) {
        let projectID = projectID ?? tokens.account.projectID
        self.projectID = projectID
        self.tokens = tokens
        self.http = http
        self.configuration = configuration
        self.clock = clock
        let base =
            configuration.endpoint.hasSuffix("/") ? String(configuration.endpoint.dropLast()) : configuration.endpoint
        self.sendURL = "\(base)/v1/projects/\(projectID)/messages:send"
    }

    /// Sends one message.
    public func send(_ message: FCMMessage, validateOnly: Bool = false) async -> PushOutcome {
        await send([message], validateOnly: validateOnly)[0]
    }

    /// Sends messages concurrently; outcomes come in the same order. `validateOnly` asks FCM to
    /// check them without delivering (a dry run).
    public func send(_ messages: [FCMMessage], validateOnly: Bool = false) async -> [PushOutcome] {
        let bodies = messages.map { $0.sendRequestBody(validateOnly: validateOnly) }
        var outcomes = [PushOutcome?](repeating: nil, count: messages.count)
        var pending = Array(messages.indices)
        for round in 0..<3 where !pending.isEmpty {
            let token: String
            do {
                token = try await tokens.token()
            } catch let error as AccessTokenError {
                let outcome: PushOutcome
                switch error {
                case .configuration(let reason): outcome = .configurationError(reason: reason, scope: .fcm)
                case .unavailable(let reason): outcome = .retry(after: nil, reason: reason)
                }
                pending.forEach { outcomes[$0] = outcome }
                break
            } catch {
                pending.forEach { outcomes[$0] = .retry(after: nil, reason: "\(error)") }
                break
            }
            let headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json; charset=UTF-8")]
            let results = await http.send(
                pending.map {
                    HTTPRequest(url: sendURL, headers: headers, body: bodies[$0], timeout: configuration.timeout)
                })
            var refused: [Int] = []
            let now = clock.now()
            for (index, result) in zip(pending, results) {
                switch result {
                case .failure(let error) where error.kind == .invalidRequest:
                    // Never the credentials' fault, and sending it again cannot help.
                    outcomes[index] = .permanentFailure(reason: error.reason(sendingTo: "FCM"))
                case .failure(let error):
                    outcomes[index] = .retry(after: nil, reason: error.reason(sendingTo: "FCM"))
                case .success(let response):
                    let (outcome, tokenRefused) = FCMErrorClassifier.classify(response, now: now)
                    if tokenRefused && round < 2 {
                        refused.append(index)
                    } else if tokenRefused {
                        outcomes[index] = .configurationError(
                            reason: "FCM refused fresh access tokens: \(outcome)", scope: .fcm)
                    } else {
                        outcomes[index] = outcome
                    }
                }
            }
            if !refused.isEmpty { await tokens.rejected(token) }
            pending = refused
        }
        return outcomes.map { $0! }
    }
}
