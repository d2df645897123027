import Foundation
import HeraldCore

/// What becomes of a delivery, decided in one place: ``DeliveryLife/next(_:after:now:backoff:)``,
/// a pure function of the delivery, what just happened to it and the time.
///
/// A delivery is `queued` (due, leased, backing off, postponed or scheduled) until it ends:
/// `sent` (or `validated`, a dry run) once its provider accepted it, then perhaps `delivered`
/// by the device's report; `expired` when its notification's expiry passed first; `cancelled`
/// when its device was disabled, has no token or was registered again (another user, a logout)
/// since it was made; `token_invalid` when the provider declared the token dead; `failed` when
/// the provider refused the message for good, or, listed as dead until redriven, when it ran
/// out of attempts.
///
/// Dispatch asks it for every claimed delivery, before the send and after the answer. The
/// retry worker's pass applies the same expiry and cancellation rules to every delivery backing
/// off, as one statement (`herald.end_hopeless_retries`).
public enum DeliveryLife {
    /// Claims a delivery gets before it is given up: retries, and leases that ran out.
    public static let maxAttempts = Backoff.maxAttempts
    /// While an app's configuration fails, its deliveries wait (without spending attempts) and
    /// one of them goes out as a probe this often, so a broken credential costs a probe a
    /// minute, not a storm. The probe is a real send, so it spends an attempt of its delivery.
    public static let configurationProbeInterval: Duration = .seconds(60)
    /// How long the rest of a probe's route waits for the probe's answer.
    static let probeWait: Duration = .seconds(5)
    /// How long a broadcast waits for its channel to be made at APNs before it looks again.
    static let channelWait: Duration = .seconds(2)

    /// What just happened to a claimed delivery.
    enum Event {
        /// Claimed, nothing sent yet: ends it if it cannot or need not be sent.
        case claimed
        /// Its route's configuration has been failing since the last probe at `failedAt`; the
        /// route's first delivery is the probe when one is due.
        case configurationFailing(failedAt: Date, probe: Bool, route: String)
        /// Its route's window was full, or its FCM project is paused after a 429: it waits
        /// `wait`, not an attempt.
        case crowdedOut(wait: Duration)
        /// What its send came to, answered at `at` (a provider's answer, or what Herald found
        /// before it could send: an unusable subscription, a refused request, a route that
        /// could not be set up). A dry run ends `validated` where a send would end `sent`.
        case sent(PushOutcome, dryRun: Bool, at: Date)
        /// A dry run Herald built and checked itself, for a provider with no validate-only
        /// request (APNs, Web Push).
        case checked(at: Date)
    }

    /// The delivery's next step; nil when it is to be sent now (after ``Event/claimed``, or a
    /// probe of a failing configuration).
    static func next(_ delivery: OutgoingDelivery, after event: Event, now: Date, backoff: Backoff)
        -> DeliveryResult?
    {
        switch event {
        case .claimed:
            if delivery.attempts > maxAttempts {
                return DeliveryResult(
                    state: .failed,
                    error: "gave up after \(maxAttempts) attempts: the last lease ran out"
                        + " (\(delivery.abandonedBy ?? "a worker") stopped before finishing)",
                    dead: true)
            }
            if delivery.notification.expiresAt <= now {
                return DeliveryResult(
                    state: .expired, error: "expired at \(delivery.notification.expiresAt) before it was sent")
            }
            if let reason = delivery.device?.disabledReason {
                return DeliveryResult(state: .cancelled, error: "device disabled since ingest: \(reason)")
            }
            if let registered = delivery.device?.registeredAgainAt {
                return DeliveryResult(
                    state: .cancelled,
                    error: "the device was registered again at \(registered) (for another user, or after a logout):"
                        + " a delivery made for its earlier registration is not sent to the new one")
            }
            if let reason = delivery.device?.pushTypeTokenDisabledReason, let type = delivery.pushType {
                return DeliveryResult(
                    state: .cancelled, error: "the device's \(type) token was disabled since ingest: \(reason)")
            }
            if let channel = delivery.channel {
                switch channel.state {
                case "creating":
                    // Not an attempt: the channels worker is making it at APNs.
                    return DeliveryResult(
                        state: .queued, error: "waiting: channel \(channel.name) is being created at APNs",
                        requeue: .postponed(until: now.addingTimeInterval(channelWait.seconds)))
                case "active": break
                default:
                    return DeliveryResult(
                        state: .cancelled,
                        error: "channel \(channel.name) is \(channel.state ?? "gone") (herald.channels)")
                }
            }
            if delivery.payloadKind == .liveActivity || delivery.payloadKind == .broadcast {
                guard let activity = delivery.liveActivity else {
                    return DeliveryResult(state: .cancelled, error: "the Live Activity's token or event is gone")
                }
                if let reason = activity.tokenEndedReason {
                    return DeliveryResult(state: .cancelled, error: "the Live Activity's token ended: \(reason)")
                }
                if let newer = activity.supersededBy {
                    return DeliveryResult(
                        state: .cancelled,
                        error:
                            "superseded by delivery \(newer), a newer event of \(delivery.channel == nil ? "activity" : "channel") \(activity.activityID)"
                    )
                }
            }
            if delivery.target == nil {
                return DeliveryResult(
                    state: .cancelled,
                    error: delivery.payloadKind == .topic
                        ? "the notification has no topic"
                        : delivery.pushType.map { "the device has no \($0) token any more" }
                            ?? "the device has no push token")
            }
            if delivery.route == nil {
                return DeliveryResult(
                    state: .cancelled,
                    error: "the device registered again as another platform since ingest: its token does not fit a"
                        + " \(delivery.payloadKind.rawValue) notification")
            }
            return nil

        case .configurationFailing(let failedAt, let probe, let route):
            let waited = now.timeIntervalSince(failedAt)
            let interval = configurationProbeInterval.seconds
            if waited >= interval && probe { return nil }
            let wait: Duration = waited < interval ? .seconds(max(1, interval - waited)) : probeWait
            return DeliveryResult(
                state: .queued,
                error: "waiting: the configuration of app \(delivery.appID) for \(route) is failing"
                    + " (see herald.app_problems)",
                requeue: .postponed(until: now.addingTimeInterval(wait.seconds)))

        case .crowdedOut(let wait):
            // No line in its error history: it may wait many times while its route is slow.
            return DeliveryResult(state: .queued, requeue: .postponed(until: now.addingTimeInterval(wait.seconds)))

        case .checked(let at):
            return DeliveryResult(state: .validated, answeredAt: at)

        case .sent(let outcome, let dryRun, let at):
            var result: DeliveryResult
            switch outcome {
            case .sent(let name, let uniqueID):
                result = DeliveryResult(state: dryRun ? .validated : .sent, messageName: name, uniqueID: uniqueID)
            case .tokenInvalid(let reason, let since):
                result = DeliveryResult(state: .tokenInvalid, error: reason, invalidSince: since)
            case .retry(let after, let reason):
                result = retry(delivery, reason: reason, notBefore: after ?? .zero, at: at, backoff: backoff)
            case .overQuota(let after, let reason):
                // Not the delivery's fault, nor an attempt: it waits as its sender does (an FCM
                // project over its quota, in every daemon; a Huawei app under traffic control, in
                // this one). The provider's words say which.
                result = DeliveryResult(
                    state: .queued, error: "waiting: the provider holds the sender back: \(reason)",
                    requeue: .postponed(until: at.addingTimeInterval(after.seconds)))
            case .configurationError(let reason, _):
                result = retry(
                    delivery, reason: "configuration: \(reason)", notBefore: configurationProbeInterval, at: at,
                    backoff: backoff)
            case .permanentFailure(let reason):
                result = DeliveryResult(state: .failed, error: reason)
            }
            result.answeredAt = at
            return result
        }
    }

    /// An attempt that failed: due again after the backoff (at least `notBefore`, a provider's
    /// `Retry-After`), or given up and dead once it was the last.
    private static func retry(
        _ delivery: OutgoingDelivery, reason: String, notBefore: Duration, at: Date, backoff: Backoff
    ) -> DeliveryResult {
        guard delivery.attempts < maxAttempts else {
            return DeliveryResult(
                state: .failed, error: "gave up after \(delivery.attempts) attempts: \(reason)", dead: true)
        }
        let delay = backoff.delay(afterAttempts: delivery.attempts, atLeast: notBefore)
        return DeliveryResult(state: .queued, error: reason, requeue: .retry(at: at.addingTimeInterval(delay.seconds)))
    }
}

/// What to record of one delivery: its new state and what goes with it.
struct DeliveryResult {
    /// Why a delivery stays queued, and when it is due again.
    enum Requeue {
        /// An attempt that failed.
        case retry(at: Date)
        /// Not attempted (a failing configuration, a full window): its claim is given back.
        case postponed(until: Date)

        var dueAt: Date {
            switch self {
            case .retry(let at), .postponed(until: let at): at
            }
        }
    }

    var state: DeliveryState
    var messageName: String? = nil
    /// APNs' `apns-unique-id`, when it gives one.
    var uniqueID: String? = nil
    var error: String? = nil
    /// For a dead token: when the provider says it died (APNs' 410 timestamp).
    var invalidSince: Date? = nil
    var requeue: Requeue? = nil
    /// Ran out of attempts: `failed`, and listed as dead until redriven.
    var dead = false
    /// When its provider answered: the delivery's `sent_at`. Nil when nothing was sent; the
    /// claim's time is recorded then.
    var answeredAt: Date? = nil
}
