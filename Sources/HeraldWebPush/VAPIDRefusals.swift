import Foundation

/// Whose fault a push service's refusal of the VAPID authorization is.
///
/// A push service ties each subscription to the `applicationServerKey` it was made with, and
/// answers 401 or 403 to a request signed with any other key. One subscription made with an
/// old or another environment's key therefore gets exactly the answer a broken app key would
/// get. Blaming the app on one subscription's word would hold every browser of the app; so a
/// refusal is the app's fault only when several subscriptions are refused and none accepted.
struct VAPIDRefusals {
    enum Verdict: Equatable {
        /// Others are accepted: this subscription was made with another key.
        case subscription
        /// Only one subscription refused so far: not yet blamed on the app.
        case undecided
        /// Several subscriptions refused and none accepted since: the app's key or subject.
        case app
    }

    /// How long an acceptance vouches for the key, and a refusal counts against it.
    static let window: TimeInterval = 600
    /// Refusals remembered at most; two are enough to decide.
    static let capacity = 64

    private(set) var lastAccepted: Date?
    /// Refused endpoints and when, within `window`, since the last acceptance.
    private(set) var refused: [String: Date] = [:]

    /// Records a batch's answers: `accepted` subscriptions' endpoints (2xx) and `refused` ones
    /// (an authorization refusal), and judges each refusal, in order.
    mutating func judge(accepted: Int, refused endpoints: [String], now: Date) -> [Verdict] {
        if accepted > 0 {
            lastAccepted = now
            refused.removeAll()
        }
        refused = refused.filter { now.timeIntervalSince($0.value) < Self.window }
        for endpoint in endpoints where refused.count < Self.capacity || refused[endpoint] != nil {
            refused[endpoint] = now
        }
        guard !endpoints.isEmpty else { return [] }
        if let lastAccepted, now.timeIntervalSince(lastAccepted) < Self.window {
            return endpoints.map { _ in .subscription }
        }
        return endpoints.map { _ in refused.count >= 2 ? .app : .undecided }
    }
}
