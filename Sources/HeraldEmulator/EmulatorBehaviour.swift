/// An error the emulator answers for one device token, to exercise a sender's handling.
public enum EmulatorBehaviour: Sendable, Equatable {
    /// 404 UNREGISTERED: the app was uninstalled.
    case unregistered
    /// 400 INVALID_ARGUMENT naming the token.
    case invalidToken
    /// 403 SENDER_ID_MISMATCH.
    case senderIDMismatch
    /// 429 QUOTA_EXCEEDED, with `Retry-After` when given.
    case quotaExceeded(retryAfter: Int?)
    /// 503 UNAVAILABLE, with `Retry-After` when given.
    case unavailable(retryAfter: Int?)
    /// 500 INTERNAL.
    case internalError
    /// 401 THIRD_PARTY_AUTH_ERROR: the app's APNs key is bad.
    case thirdPartyAuthError
    /// 400 INVALID_ARGUMENT about the message, not the token.
    case invalidMessage
    /// Answers normally, after a delay.
    case slow(milliseconds: Int)
}
