import HeraldCore
import HeraldHTTP

extension PushOutcome {
    /// What a push service's HTTP status says when its answer carries no code of its own (Mi
    /// Push, OPPO Push and vivo Push put theirs in a 200): 401 and 403 the app's setup, 404 a
    /// send URL that is wrong, 400 this message, 429 the app's rate; any other, or no answer, is
    /// tried again.
    static func ofStatus(
        _ status: Int?, said: String, reason: String, retryAfter: Duration?, scope: ConfigurationScope
    ) -> PushOutcome {
        switch status {
        case 401, 403:
            .configurationError(reason: reason, scope: scope)
        case 404:
            .configurationError(reason: "\(said): the send URL is wrong (HERALD_PROVIDER_ENDPOINTS?)", scope: scope)
        case 400:
            .permanentFailure(reason: reason)
        case 429:
            .overQuota(after: retryAfter ?? .seconds(1), reason: reason + " (the app's rate)")
        default:
            .retry(after: retryAfter, reason: reason)
        }
    }
}

extension AccessTokenError {
    /// What becomes of a send that got no access token: the app's setup (`scope`) when the
    /// provider refused its credentials, else it is tried again.
    func outcome(scope: ConfigurationScope) -> PushOutcome {
        switch self {
        case .configuration(let reason): .configurationError(reason: reason, scope: scope)
        case .unavailable(let reason): .retry(after: nil, reason: reason)
        }
    }
}
