import Foundation
import HeraldQueue
import Synchronization

/// A clock that moves only when a test moves it.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        current = Mutex(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    public func advance(by duration: Duration) {
        current.withLock { $0 = $0.addingTimeInterval(duration.seconds) }
    }
}
