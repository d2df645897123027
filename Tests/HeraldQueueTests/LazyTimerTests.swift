import Synchronization
import Testing

@testable import HeraldQueue

/// One timer for deadlines that keep moving later, armed again only for an earlier one; and a
/// loop's wait, which ends at its timeout through it.
@Suite(.timeLimit(.minutes(1))) struct LazyTimerTests {
    /// Calls to a handler, with when each came.
    final class Calls: Sendable {
        let times = Mutex<[ContinuousClock.Instant]>([])
        func record() { times.withLock { $0.append(.now) } }
        var count: Int { times.withLock { $0.count } }

        /// Waits until there have been `expected` calls, for at most 10 s (a loaded machine's
        /// timers are late, not 30 s late).
        func reach(_ expected: Int) async throws {
            let end = ContinuousClock.now + .seconds(10)
            while count < expected, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    @Test func theHandlerRunsAtTheDeadlineAndAgainWhenItAsks() async throws {
        let timer = LazyTimer()
        let calls = Calls()
        let start = ContinuousClock.now
        let second = start + .milliseconds(120)
        timer.ensure(by: start + .milliseconds(40)) {
            calls.record()
            return calls.count == 1 ? second : nil
        }
        try await calls.reach(2)
        let times = calls.times.withLock { $0 }
        #expect(times.count == 2)
        #expect(times.first.map { $0 >= start + .milliseconds(40) } == true, "not before its deadline")
        #expect(times.last.map { $0 >= second } == true)
    }

    @Test func anEarlierDeadlineArmsItAgain() async throws {
        let timer = LazyTimer()
        let calls = Calls()
        let start = ContinuousClock.now
        timer.ensure(by: start + .seconds(30)) {
            calls.record()
            return nil
        }
        timer.ensure(by: start + .milliseconds(30)) {
            calls.record()
            return nil
        }
        try await calls.reach(1)
        #expect(calls.count == 1, "once, at the earlier deadline, well before 30 s")
    }

    /// A signal's successive waits share its timer: one signalled early leaves the timer armed
    /// for its deadline, and the next wait, with a later one, still ends at its own timeout.
    @Test func aWaitEndsAtItsTimeoutAfterEarlierWaitsWereSignalled() async throws {
        let signal = WakeSignal()
        for _ in 1...3 {
            let waiting = Task { await signal.wait(timeout: .milliseconds(150)) }
            try await Task.sleep(for: .milliseconds(20))
            signal.signal()
            await waiting.value
        }
        let start = ContinuousClock.now
        await signal.wait(timeout: .milliseconds(300))
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(300) && waited < .seconds(3), "\(waited)")
    }

    @Test func aCancelledWaitEndsAtOnce() async throws {
        let signal = WakeSignal()
        let start = ContinuousClock.now
        let waiting = Task { await signal.wait(timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        await waiting.value
        #expect(ContinuousClock.now - start < .seconds(5))
    }
}
