import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import Synchronization
import Testing

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

    /// Proves the wake comes from NOTIFY: the waiter has no poll, only a long timeout.
    /// How fast it wakes is a benchmark figure, not asserted here.
    @Test func committedInsertWakesAWaitingWorker() async throws {
        let database = try await TestDatabase.create()
        let hub = WakeHub()
        let signal = hub.register(kind: "wake")
        let listener = PostgresListener(
            conninfo: database.conninfo, channels: [WakeHub.channel], logger: Logger(label: "test"),
            onNotification: { hub.wake(kind: $0.payload) })
        listener.start()
        defer { listener.stop() }
        let producer = try await database.connect()

        async let waited: Duration = {
            let start = ContinuousClock.now
            await signal.wait(timeout: .seconds(120))
            return ContinuousClock.now - start
        }()
        try await Task.sleep(for: .milliseconds(100))
        try await producer.query("INSERT INTO herald.jobs (kind) VALUES ('wake')")
        let elapsed = await waited
        #expect(elapsed < .seconds(60), "the wait ended by timeout, not by NOTIFY")
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
}
