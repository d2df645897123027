import Foundation
import HeraldPostgres
import HeraldTestSupport
import Logging
import Synchronization
import Testing

@testable import HeraldQueue

@Suite struct WakeupTests {
    final class Received: Sendable {
        let kinds = Mutex<[String]>([])
    }

    func listen(_ database: TestDatabase) -> (PostgresListener, Received) {
        let received = Received()
        let listener = PostgresListener(
            conninfo: database.conninfo, channels: [WakeHub.channel], logger: Logger(label: "test"),
            onNotification: { message in received.kinds.withLock { $0.append(message.payload) } })
        listener.start()
        return (listener, received)
    }

    /// Proves the wake comes from NOTIFY: the waiter has no poll, and its timeout is on a clock
    /// that does not move. How fast it wakes is a benchmark figure, not asserted here.
    @Test func committedInsertWakesAWaitingWorker() async throws {
        let database = try await TestDatabase.create()
        let hub = WakeHub(clock: ManualClock().monotonic)
        let signal = hub.register(kind: "wake")
        let listener = PostgresListener(
            conninfo: database.conninfo, channels: [WakeHub.channel], logger: Logger(label: "test"),
            onNotification: { hub.wake(kind: $0.payload) })
        listener.start()
        defer { listener.stop() }
        let producer = try await database.connect()
        let woken = Atomic<Bool>(false)
        let waiting = Task {
            await signal.wait(timeout: .seconds(120))
            woken.store(true, ordering: .sequentiallyConsistent)
        }
        defer { waiting.cancel() }
        #expect(await eventually { signal.isWaitingForWork })
        try await producer.query("INSERT INTO herald.jobs (kind) VALUES ('wake')")
        #expect(await eventually { woken.load(ordering: .sequentiallyConsistent) }, "no NOTIFY ended the wait")
    }

    @Test func rolledBackInsertWakesNobodyAndLeavesNoJob() async throws {
        let database = try await TestDatabase.create()
        let (listener, received) = listen(database)
        defer { listener.stop() }
        let producer = try await database.connect()
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await producer.transaction { session in
                try session.query("INSERT INTO herald.jobs (kind) VALUES ('ghost')")
                throw Abort()
            }
        }
        // A committed marker afterwards proves the listener was live and in order.
        try await producer.query("INSERT INTO herald.jobs (kind) VALUES ('marker')")
        #expect(await eventually { received.kinds.withLock { $0.contains("marker") } })
        #expect(received.kinds.withLock { $0 } == ["marker"])
        #expect(
            try await producer.query("SELECT count(*) FROM herald.jobs WHERE kind = 'ghost'")[0].decode(0, as: Int.self)
                == 0)
    }

    @Test func oneTransactionSendsOneNotificationPerKind() async throws {
        let database = try await TestDatabase.create()
        let (listener, received) = listen(database)
        defer { listener.stop() }
        let producer = try await database.connect()
        try await producer.transaction { session in
            for _ in 0..<3 {
                try session.query("INSERT INTO herald.jobs (kind) SELECT 'bulk' FROM generate_series(1, 50)")
            }
            try session.query("INSERT INTO herald.jobs (kind, run_at) VALUES ('later', now() + interval '1 hour')")
        }
        try await producer.query("INSERT INTO herald.jobs (kind) VALUES ('marker')")
        #expect(await eventually { received.kinds.withLock { $0.contains("marker") } })
        #expect(received.kinds.withLock { $0 } == ["bulk", "marker"])
    }

    /// Loops of one kind waiting on `hub`, each in a task of its own: `forWork` says whether a
    /// loop waits for work (true) or out an error's pause (false). Returns once every one waits.
    func waiting(
        on hub: WakeHub, kind: String, forWork: [Bool], in tasks: inout ThrowingTaskGroup<Void, any Error>
    ) async -> [WakeSignal] {
        let signals = forWork.map { _ in hub.register(kind: kind) }
        for (signal, forWork) in zip(signals, forWork) {
            tasks.addTask {
                if forWork { await signal.wait(timeout: .seconds(3600)) } else { await signal.pause(.seconds(3600)) }
            }
        }
        // A minute: beside the whole suite on two cores, a task has waited seconds to start.
        #expect(await eventually(timeout: .seconds(60)) { signals.allSatisfy(\.isWaiting) })
        return signals
    }

    /// A NOTIFY wakes one loop that waits for work, not every one: the others would claim
    /// nothing. (`signal()` resumes a waiter at once, so the others are read right after; a
    /// loop says it begins its claim with `claiming()`, as ``WorkerRunner`` does.)
    @Test func aWakeEndsOneLoopsWaitForWork() async throws {
        let hub = WakeHub()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let signals = await waiting(on: hub, kind: "trickle", forWork: [true, true, true], in: &tasks)
            hub.wake(kind: "trickle")
            #expect(signals.map(\.isWaitingForWork) == [false, true, true])
            // Until the woken loop begins its claim, that claim covers any wake-up: nobody else
            // is woken for it.
            hub.wake(kind: "trickle")
            #expect(signals.map(\.isWaitingForWork) == [false, true, true])
            try await tasks.next()
            signals[0].claiming()
            hub.wake(kind: "trickle")
            #expect(signals.map(\.isWaitingForWork) == [false, false, true])
            try await tasks.next()
            tasks.cancelAll()
        }
    }

    /// A loop pausing after a failed claim is woken only when no loop waits for work.
    @Test func aLoopWaitingForWorkIsWokenBeforeOnePausingAfterAnError() async throws {
        let hub = WakeHub()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let signals = await waiting(on: hub, kind: "mixed", forWork: [false, true], in: &tasks)
            hub.wake(kind: "mixed")
            #expect(signals.map(\.isWaiting) == [true, false])
            try await tasks.next()
            signals[1].claiming()
            hub.wake(kind: "mixed")
            #expect(signals.map(\.isWaiting) == [false, false])
            try await tasks.next()
        }
    }

    /// With no loop waiting, every loop keeps the wake-up and looks again once its batch is
    /// done: the work announced is never left for the poll interval.
    @Test func aWakeWhileEveryLoopIsBusyIsKeptByEach() async throws {
        let hub = WakeHub()
        let signals = (0..<2).map { _ in hub.register(kind: "busy") }
        hub.wake(kind: "busy")
        hub.wakeAnother(kind: "busy")  // nobody waits: nothing more to do
        for signal in signals {
            let start = ContinuousClock.now
            await signal.wait(timeout: .seconds(30))
            #expect(ContinuousClock.now - start < .seconds(20), "the wake-up was not kept")
        }
    }
}
