import Foundation

/// What became of one send, as the workers need to know it, whatever the provider. The
/// provider's client decides only this; what to do next (disable a device, back off, alert)
/// is the workers' business.
public enum PushOutcome: Sendable, Equatable {
    /// The provider accepted the message; `messageName` is its id for it (FCM's
    /// `projects/<p>/messages/<id>`, a Web Push message's `Location`, the `apns-id`), and
    /// `uniqueID` APNs' `apns-unique-id` when it gives one (its development environment).
    case sent(messageName: String, uniqueID: String? = nil)
    /// The token or subscription is dead or belongs elsewhere (FCM's 404 UNREGISTERED, 403
    /// SENDER_ID_MISMATCH, a 400 that names the token; Web Push's 404 and 410; APNs' 400
    /// BadDeviceToken and 410 Unregistered). Stop using it; when `since` is given (APNs' 410
    /// timestamp), only if the device registered the token before then.
    case tokenInvalid(reason: String, since: Date? = nil)
    /// Try again later: after `after` when the server said so (or a quota's 60 s floor), otherwise
    /// after the caller's own backoff.
    case retry(after: Duration?, reason: String)
    /// The sender is over its own quota (FCM's per-project quota, or a 429 FCM gives when
    /// overloaded): every send of the sender waits `after` (its `Retry-After`, else a minute),
    /// and this one is not the device's fault, nor an attempt. A rate of one device or topic
    /// is a `retry` of that target's sends only.
    case overQuota(after: Duration, reason: String)
    /// The sender's credentials or setup are wrong (403 permission denied, a refused token
    /// request, 401 THIRD_PARTY_AUTH_ERROR, a refused VAPID token). Never the device's fault;
    /// `scope` says what waits until it is fixed.
    case configurationError(reason: String, scope: ConfigurationScope)
    /// The provider rejected this message for good (a 400 about its content), in its words.
    case permanentFailure(reason: String)
}

/// What a configuration problem is about, so that only what depends on it waits: a row of
/// `herald.config_scopes`, named by the provider that finds it (``ConfigurationScope/fcm``
/// and the rest are declared beside their providers' clients).
public struct ConfigurationScope: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
}
