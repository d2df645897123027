/// The claim size of one worker loop, adapted to the load: it doubles after a claim that came
/// back full (a backlog: larger claims cost fewer round trips per item) and halves after one
/// that came back less than half full (a short queue: small claims keep latency and the
/// duplicate window after a crash small), between ``smallest`` and the cap
/// (`HERALD_BATCH_SIZE`). An empty claim leaves it as it is: it says nothing of how much comes
/// at once. (Halving on one, a steady trickle of ten a commit filled every claim of ten
/// exactly, and each full claim was followed by two that found nothing: the loop's look again
/// and the loop it woke.)
public struct BatchSizer: Sendable {
    public let cap: Int
    public private(set) var limit: Int
    /// The claim size of an idle queue.
    public static let smallest = 10
    /// The default cap: past it, larger claims gained little throughput (measured end to end)
    /// and cost memory and a larger duplicate window after a crash.
    public static let defaultCap = 500

    public init(cap: Int) {
        self.cap = max(cap, 1)
        limit = min(Self.smallest, self.cap)
    }

    public mutating func claimed(_ count: Int) {
        if count >= limit {
            limit = min(cap, limit * 2)
        } else if count > 0 && count < limit / 2 {
            limit = max(min(Self.smallest, cap), limit / 2)
        }
    }
}
