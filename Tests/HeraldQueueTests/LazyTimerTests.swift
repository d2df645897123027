import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldQueue

/// One timer for deadlines that keep moving later, armed again only for an earlier one; and a
/// loop's wait, which ends at its timeout through it. On a clock the tests move: each waits
/// until the timer sleeps, then moves the time.
@Suite(.timeLimit(.minutes(1))) struct LazyTimerTests {
    let clock = ManualClock()

    /// Calls to a handler, with the clock's time at each.
    final class Calls: Sendable {
        let times = Mutex<[ContinuousClock.Instant]>([])
        let reached = Mutex<[(count: Int, resume: CheckedContinuation<Void, Never>)]>([])
        func record(at now: ContinuousClock.Instant) {
            let count = times.withLock {
                $0.append(now); return $0.count
            }
            let due = reached.withLock { waiting in
                defer { waiting.removeAll { $0.count <= count } }
                return waiting.filter { $0.count <= count }
            }
            for waiter in due { waiter.resume.resume() }
        }
        var count: Int { times.withLock { $0.count } }

        /// Returns once there have been `expected` calls (the suite's time limit ends a wait
        /// for a call that never comes).
        func reach(_ expected: Int) async {
            await withCheckedContinuation { (resume: CheckedContinuation<Void, Never>) in
                let now = times.withLock { times in
                    if times.count >= expected { return true }
                    reached.withLock { $0.append((expected, resume)) }
                    return false
                }
                if now { resume.resume() }
            }
        }
    }

    @Test func theHandlerRunsAtTheDeadlineAndAgainWhenItAsks() async throws {
        let timer = LazyTimer(clock: clock.monotonic)
        let calls = Calls()
        let start = clock.instant
        let second = start + .milliseconds(120)
        timer.ensure(by: start + .milliseconds(40)) { [clock] in
            calls.record(at: clock.instant)
            return calls.count == 1 ? second : nil
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(39))
        #expect(calls.count == 0, "not before its deadline")
        clock.advance(by: .milliseconds(1))
        await calls.reach(1)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(79))
        #expect(calls.count == 1, "not before the deadline it asked for")
        clock.advance(by: .milliseconds(1))
        await calls.reach(2)
        #expect(calls.times.withLock { $0 } == [start + .milliseconds(40), second])
    }

    @Test func anEarlierDeadlineArmsItAgain() async throws {
        let timer = LazyTimer(clock: clock.monotonic)
        let calls = Calls()
        let start = clock.instant
        timer.ensure(by: start + .seconds(30)) { [clock] in
            calls.record(at: clock.instant)
            return nil
        }
        timer.ensure(by: start + .milliseconds(30)) { [clock] in
            calls.record(at: clock.instant)
            return nil
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(30))
        await calls.reach(1)
        #expect(clock.sleeping == 0, "the task armed for 30 s was replaced, not left sleeping")
        clock.advance(by: .seconds(60))
        #expect(calls.times.withLock { $0 } == [start + .milliseconds(30)], "once, at the earlier deadline")
    }

    /// A signal's successive waits share its timer: one signalled early leaves the timer armed
    /// for its deadline, and the next wait, with a later one, still ends at its own timeout.
    @Test func aWaitEndsAtItsTimeoutAfterEarlierWaitsWereSignalled() async throws {
        let signal = WakeSignal(clock: clock.monotonic)
        for _ in 1...3 {
            let waiting = Task { await signal.wait(timeout: .milliseconds(150)) }
            while !signal.isWaitingForWork { await Task.yield() }
            clock.advance(by: .milliseconds(20))
            signal.signal()
            await waiting.value
        }
        let start = clock.instant
        let ended = Mutex<ContinuousClock.Instant?>(nil)
        let waiting = Task { [clock] in
            await signal.wait(timeout: .milliseconds(300))
            ended.withLock { $0 = clock.instant }
        }
        while !signal.isWaitingForWork { await Task.yield() }
        // The timer sleeps to the first wait's deadline (earlier than this one's), then, woken
        // there, to this one's.
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(299))
        await clock.sleepers(atLeast: 1)
        #expect(ended.withLock { $0 } == nil)
        clock.advance(by: .milliseconds(1))
        await waiting.value
        #expect(ended.withLock { $0 } == start + .milliseconds(300))
    }

    @Test func aCancelledWaitEndsAtOnce() async throws {
        let signal = WakeSignal(clock: clock.monotonic)
        let waiting = Task { await signal.wait(timeout: .seconds(30)) }
        while !signal.isWaitingForWork { await Task.yield() }
        waiting.cancel()
        await waiting.value
        #expect(!signal.isWaitingForWork)
    }
}
