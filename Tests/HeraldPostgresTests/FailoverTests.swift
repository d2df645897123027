import Foundation
import HeraldPostgres
import HeraldTestSupport
import Logging
import Synchronization
import Testing

/// A primary that turns read-only without closing its connections, as in an Aurora failover,
/// while its streaming standby is promoted: Herald's connections find the new primary through
/// the host list and `target_session_attrs=read-write`.
@Suite struct FailoverTests {
    final class Inbox: Sendable {
        let payloads = Mutex<[String]>([])
        let reconnects = Atomic<Int>(0)
    }

    @Test func connectionAndListenerFollowAPrimaryTurnedReadOnlyToThePromotedStandby() async throws {
        try await takingTurns {
            let primary = try await onOwnThread { try PrivateCluster() }
            let primaryAdmin = try await PostgresConnection.connect(
                primary.conninfo("postgres"), acceptsReadOnlyServers: true)
            try await primaryAdmin.execute("CREATE TABLE failover (port int NOT NULL, note text NOT NULL)")
            let standby = try await onOwnThread { try PrivateCluster(standbyOf: primary) }
            let standbyAdmin = try await PostgresConnection.connect(
                standby.conninfo("postgres"), acceptsReadOnlyServers: true)
            #expect(try await standbyAdmin.query("SELECT pg_is_in_recovery()")[0].decode(0, as: Bool.self))

            let conninfo =
                "host=127.0.0.1,127.0.0.1 port=\(primary.port),\(standby.port) user=postgres dbname=postgres "
                + "target_session_attrs=read-write connect_timeout=5"
            let link = DatabaseLink(logger: Logger(label: "test"))
            let connection = PostgresConnection(conninfo: conninfo, link: link)
            // A transaction with a prepared statement, as the workers' writes are.
            @Sendable func write(_ note: String) async throws -> Int32 {
                try await connection.transaction { session in
                    try session.query(
                        "INSERT INTO failover (port, note) VALUES (inet_server_port(), $1) RETURNING port", [note]
                    )[0].decode(0, as: Int32.self)
                }
            }
            #expect(try await write("before") == Int32(primary.port))
            #expect(link.snapshot.server == "127.0.0.1:\(primary.port)" && link.snapshot.writable)

            let inbox = Inbox()
            let listener = PostgresListener(
                conninfo: conninfo, channels: ["herald_failover"], logger: Logger(label: "test"),
                onNotification: { message in inbox.payloads.withLock { $0.append(message.payload) } },
                onReconnect: { inbox.reconnects.add(1, ordering: .relaxed) })
            listener.start()
            defer { listener.stop() }
            try await connection.query("SELECT pg_notify('herald_failover', 'before')")
            #expect(await eventually { inbox.payloads.withLock { $0.contains("before") } })

            // The primary turns read-only, its connections kept open; the standby takes over.
            try await primaryAdmin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            try await primaryAdmin.query("SELECT pg_reload_conf()")
            #expect(
                await eventually {
                    (try? await primaryAdmin.query("SHOW transaction_read_only")[0].decode(0, as: String.self)) == "on"
                })
            #expect(try await standbyAdmin.query("SELECT pg_promote()")[0].decode(0, as: Bool.self))

            // The first write may still meet the old primary and fail; the next lands on the new one.
            var failures: [PostgresError] = []
            var landedOn: Int32?
            for attempt in 0..<20 where landedOn == nil {
                do {
                    landedOn = try await write("after \(attempt)")
                } catch let error as PostgresError {
                    failures.append(error)
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            #expect(landedOn == Int32(standby.port))
            #expect(failures.count <= 1, "\(failures)")
            #expect(failures.allSatisfy { $0.isReadOnlyServer }, "\(failures)")
            #expect(try await connection.query("SELECT pg_is_in_recovery()")[0].decode(0, as: Bool.self) == false)
            // What `/healthz` and the metrics show: the new server, writable, after one reconnect.
            let seen = link.snapshot
            #expect(seen.server == "127.0.0.1:\(standby.port)" && seen.writable && seen.reconnects == 1, "\(seen)")

            // The listener moves too, and says so, so that the workers look for work.
            let heard = await eventually(timeout: .seconds(15), every: .milliseconds(200)) {
                _ = try? await standbyAdmin.query("SELECT pg_notify('herald_failover', 'after')")
                return inbox.payloads.withLock { $0.contains("after") }
            }
            #expect(heard)
            #expect(inbox.reconnects.load(ordering: .relaxed) >= 1)
        }
    }

    /// A primary turned read-only is noticed by a session of reads alone (PostgreSQL reports the
    /// change to the client), so that no connection stays on it, not even the endpoint's; a
    /// connection that reaches it fails before its statement runs; and once it takes writes
    /// again, the link says so.
    @Test func aSessionOfReadsNoticesTheServerTurnedReadOnly() async throws {
        try await takingTurns {
            let cluster = try await onOwnThread { try PrivateCluster() }
            let admin = try await PostgresConnection.connect(cluster.conninfo("postgres"), acceptsReadOnlyServers: true)
            let link = DatabaseLink(logger: Logger(label: "test"))
            let connection = PostgresConnection(conninfo: cluster.conninfo("postgres"), link: link)
            try await connection.query("SELECT 1")
            #expect(link.snapshot.writable && link.snapshot.problem == nil)

            try await admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            try await admin.query("SELECT pg_reload_conf()")
            let noticed = await eventually {
                _ = try? await connection.query("SELECT 1")
                return !link.snapshot.writable
            }
            #expect(noticed)
            #expect(link.snapshot.problem?.contains("default_transaction_read_only is on") == true, "\(link.snapshot)")
            do {
                try await connection.query("SELECT 1")
                Issue.record("a connection to a read-only server ran a statement")
            } catch let error as PostgresError {
                #expect(error.isReadOnlyServer && error.isTransient, "\(error)")
            }

            try await admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
            try await admin.query("SELECT pg_reload_conf()")
            #expect(await eventually { (try? await connection.query("SELECT 1")) != nil })
            let after = link.snapshot
            #expect(after.writable && after.unwritableFor == .zero && after.reconnects >= 2, "\(after)")
        }
    }
}
