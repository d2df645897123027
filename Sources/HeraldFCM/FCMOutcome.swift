/// What became of one send, as the workers need to know it. The FCM client decides only
/// this; what to do next (disable a device, back off, alert) is the workers' business.
public enum FCMOutcome: Sendable, Equatable {
    /// FCM accepted the message; `messageName` is `projects/<p>/messages/<id>`.
    case sent(messageName: String)
    /// The token is dead or belongs elsewhere (404 UNREGISTERED, 403 SENDER_ID_MISMATCH, a 400
    /// that names the token). Stop using it.
    case tokenInvalid(reason: String)
    /// Try again later: after `after` when the server said so (or a quota's 60 s floor), otherwise
    /// after the caller's own backoff.
    case retry(after: Duration?, reason: String)
    /// The sender's credentials or setup are wrong (401 THIRD_PARTY_AUTH_ERROR, 403 permission
    /// denied, a refused token request). Never the device's fault.
    case configurationError(reason: String)
    /// FCM rejected this message for good (a 400 about its content), with FCM's words.
    case permanentFailure(reason: String)
}

/// A push token as logs and operators' views show it: its first 8 characters. Never log a
/// whole token; it is enough to send to the device.
public func tokenHint(_ token: String) -> String {
    String(token.prefix(8)) + "…"
}
