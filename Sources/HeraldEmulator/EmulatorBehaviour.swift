import Foundation

/// An error the emulator answers for one device token or Web Push endpoint, to exercise a
/// sender's handling. Each stand-in answers it in its own protocol's terms.
public enum EmulatorBehaviour: Sendable, Equatable {
    /// 404 UNREGISTERED: the app was uninstalled (Web Push: 404; APNs: 410 Unregistered).
    case unregistered
    /// APNs: 410 Unregistered with this `timestamp` (the others: as unregistered).
    case unregisteredSince(Date)
    /// APNs: 403 ExpiredProviderToken (FCM: as a third-party auth error; Web Push: 403).
    case expiredProviderToken
    /// Web Push: 410 Gone, the subscription expired or was unsubscribed (APNs: 410
    /// ExpiredToken; FCM: as unregistered).
    case gone
    /// Web Push: 413 (FCM: 400 about the message's size).
    case payloadTooLarge
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
    /// 401 THIRD_PARTY_AUTH_ERROR: the app's APNs key is bad (Web Push: 403, VAPID refused).
    case thirdPartyAuthError
    /// 400 INVALID_ARGUMENT about the message, not the token.
    case invalidMessage
    /// 400 whose text holds a NUL and other control characters, as a broken or hostile server
    /// may answer (APNs: in its reason; FCM: in its message).
    case garbledAnswer
    /// Answers normally, after a delay.
    case slow(milliseconds: Int)
}
