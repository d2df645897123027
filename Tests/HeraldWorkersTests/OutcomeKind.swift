import HeraldCore
import Testing

@testable import HeraldWorkers

/// What a provider's answer came to, without its words: what the tests of a provider's table
/// of answers compare.
enum OutcomeKind: Equatable {
    case sent, tokenInvalid, configuration, retry, overQuota, failed

    /// `outcome`'s kind; a configuration error must be of `scope`.
    init(_ outcome: PushOutcome, scope: ConfigurationScope) {
        switch outcome {
        case .sent: self = .sent
        case .tokenInvalid: self = .tokenInvalid
        case .configurationError(_, let found):
            #expect(found == scope)
            self = .configuration
        case .retry: self = .retry
        case .overQuota: self = .overQuota
        case .permanentFailure: self = .failed
        }
    }
}
