import Foundation
import HeraldPostgres
import HeraldTestSupport
import Logging
import Synchronization
import Testing

@Suite struct PostgresListenerTests {
    final class Inbox: Sendable {
        let messages = Mutex<[PostgresNotification]>([])
        let reconnects = Atomic<Int>(0)
    }

    @Test func deliversNotificationsAndResubscribesAfterReconnect() async throws {
        let database = try await TestDatabase.create(migrated: false)
        let inbox = Inbox()
        let listener = PostgresListener(
            conninfo: database.conninfo, channels: ["herald_test"], logger: Logger(label: "test"),
            onNotification: { message in inbox.messages.withLock { $0.append(message) } },
            onReconnect: { inbox.reconnects.add(1, ordering: .relaxed) })
        listener.start()
        defer { listener.stop() }
        let sender = try await database.connect()

        try await sender.query("SELECT pg_notify('herald_test', $1)", ["first"])
        #expect(await eventually(timeout: .seconds(10)) { inbox.messages.withLock { $0.count } == 1 })
        #expect(inbox.messages.withLock { $0 } == [PostgresNotification(channel: "herald_test", payload: "first")])

        // End the listener's session from outside, as a server restart would: the only other
        // session on this database (its last query is its read-only check, not LISTEN).
        try await sender.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        #expect(await eventually(timeout: .seconds(10)) { inbox.reconnects.load(ordering: .relaxed) == 1 })
        try await sender.query("SELECT pg_notify('herald_test', $1)", ["second"])
        #expect(await eventually(timeout: .seconds(10)) { inbox.messages.withLock { $0.count } == 2 })
    }
}
