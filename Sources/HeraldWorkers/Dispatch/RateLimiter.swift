import Foundation
import HeraldCore

/// A token bucket: at most `rate` sends a second on average, in bursts of up to one second's
/// worth. One per FCM project, since FCM's quota is per project.
public actor RateLimiter {
    let rate: Double
    private var tokens: Double
    private var updated = ContinuousClock.now

    /// Just under FCM's default 600,000 messages a minute.
    public static let defaultRate = 9_900.0

    public init(perSecond rate: Double) {
        self.rate = rate
        self.tokens = rate
    }

    /// Waits until `count` sends are allowed, then takes them.
    public func acquire(_ count: Int) async {
        refill()
        tokens -= Double(count)
        if tokens < 0 {
            // Reserve now (so concurrent callers queue behind us), then wait for the debt to clear.
            try? await Task.sleep(for: .milliseconds(Int64(-tokens / rate * 1000)))
        }
    }

    private func refill() {
        let now = ContinuousClock.now
        tokens = min(rate, tokens + (now - updated).seconds * rate)
        updated = now
    }
}
