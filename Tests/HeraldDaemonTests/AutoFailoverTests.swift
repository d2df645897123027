import Foundation
import HeraldPostgres
import HeraldTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Herald under load through the failovers operators run, with pg_auto_failover (a monitor and
/// two nodes, synchronous replication): a planned switchover, then the primary's processes
/// lost (keeper and postmaster killed at once). The daemon is given the formation's multi-host URI
/// and is never restarted. Nothing may be lost, duplicates stay within what was in flight, and
/// sending resumes within seconds of the promotion.
@Suite struct AutoFailoverTests {
    @Test func followsASwitchoverAndAHardFailoverUnderLoad() async throws {
        try await takingTurns {
            let formation = try await onOwnThread { try AutoFailoverFormation() }
            let migrated = try await HeraldProcess.run(["migrate"], environment: ["HERALD_DATABASE_URL": formation.uri])
            try #require(migrated.status == 0, "\(migrated.output)")
            let users = 1000
            let db = try await PostgresConnection.connect(formation.uri)
            let load = try await CrashLoad.start(db, notifications: users)
            defer { load.accountFile.remove() }
            let daemon = try HeraldProcess(
                ["run"], environment: load.daemonEnvironment(formation.uri, lease: "300s", rescueInterval: "500ms"))
            defer { daemon.send(SIGKILL) }
            let producer = SteadyProducer()
            // Stopped however the test ends, and given the URI alone: a producer left running
            // would keep the formation (and its servers) alive.
            defer { producer.stopped.store(true, ordering: .relaxed) }
            let uri = formation.uri
            let producing = Task { await producer.run(try await PostgresConnection.connect(uri), users: users) }

            /// Whether any of `ids` has been sent.
            func anySent(_ ids: Set<Int64>) async -> Bool {
                let sent = try? await db.query(
                    "SELECT count(*) FROM herald.deliveries WHERE notification_id = ANY($1) AND state = 'sent'",
                    [Array(ids)])[0].decode(0, as: Int.self)
                return (sent ?? 0) > 0
            }
            func seconds(_ duration: Duration) -> String { String(format: "%.1f s", duration.seconds) }

            var figures: [String] = []
            let failovers: [(String, @Sendable () async throws -> Void)] = [
                ("switchover", { try await formation.switchover() }),
                ("primary killed", { try await formation.killPrimary() }),
            ]
            for (kind, failover) in failovers {
                // Synchronous replication again first: after the switchover the old primary takes
                // a while to come back as a standby, and a primary killed before then takes with it
                // what it committed alone (nothing Herald can keep).
                try await formation.waitStable()
                let sendsBefore = await load.emulator.received.count
                let sending = await eventually(timeout: .seconds(60), every: .milliseconds(20)) {
                    await load.emulator.received.count > sendsBefore + 200
                }
                try #require(sending, "\(daemon.output.suffix(3000))")
                let old = await formation.primaryPort()
                let started = ContinuousClock.now
                try await failover()
                var promoted: (instant: ContinuousClock.Instant, date: Date)?
                _ = await eventually(timeout: .seconds(90), every: .milliseconds(100)) {
                    guard let port = await formation.primaryPort(), port != old else { return false }
                    promoted = (.now, Date())
                    return true
                }
                let promotion = try #require(promoted, "no node was promoted after the \(kind)")
                // Sending resumes: a send answered after the promotion is recorded on the new primary.
                var resumed: ContinuousClock.Instant?
                _ = await eventually(timeout: .seconds(30), every: .milliseconds(50)) {
                    guard await CrashLoad.sentAny(db, since: promotion.date) else { return false }
                    resumed = .now
                    return true
                }
                let sendingAgain = try #require(
                    resumed, "nothing was sent in the 30 s after the \(kind): \(daemon.output.suffix(3000))")
                // And how long a notification committed on the new primary waited (a figure: it waits
                // behind the backlog the outage left, so it depends on this machine's pace).
                var firstNew: ContinuousClock.Instant?
                _ = await eventually(timeout: .seconds(60), every: .milliseconds(100)) {
                    guard let ids = producer.firstCommitted(after: promotion.instant), await anySent(ids) else {
                        return false
                    }
                    firstNew = .now
                    return true
                }
                figures.append(
                    "\(kind): promoted after \(seconds(promotion.instant - started)), sending again"
                        + " \(seconds(sendingAgain - promotion.instant)) after the promotion, the first notification"
                        + " committed on the new primary sent "
                        + (firstNew.map { "\(seconds($0 - promotion.instant)) after it" } ?? "not within a minute"))
            }
            try await Task.sleep(for: .seconds(2))
            producer.stopped.store(true, ordering: .relaxed)
            try await producing.value

            // A connection of the test's own made before the failovers may be to a server gone since.
            let after = try await PostgresConnection.connect(formation.uri)
            // Within the 300 s lease and a minute: a claim whose reply the kill cut off (it
            // committed, the daemon never heard) waits out its lease before it is sent
            // (docs/high-availability.md); everything else is sent within seconds.
            #expect(try await CrashLoad.finishes(after, within: .seconds(360)), "\(daemon.output.suffix(3000))")
            #expect(
                daemon.process.isRunning, "the daemon did not ride out the failovers: \(daemon.output.suffix(3000))")
            // What the daemon says of its database: the node that is primary now, writable, reconnected.
            let port = try #require(
                daemon.output.firstMatch(of: /HTTP endpoint listening address=127\.0\.0\.1:(\d+) routes=metrics/)?.1)
            let health = try await runProgram("/usr/bin/curl", ["-s", "http://127.0.0.1:\(port)/healthz"])
            let primary = try #require(await formation.primaryPort())
            #expect(health.output.contains("\"server\":\"127.0.0.1:\(primary)\""), "\(health.output)")
            #expect(health.output.contains("\"writable\":true"), "\(health.output)")
            let reconnects = health.output.firstMatch(of: /"reconnects":(\d+)/).flatMap { Int($0.1) } ?? 0
            #expect(reconnects >= 2, "\(health.output)")
            daemon.send(SIGTERM)
            #expect(await daemon.waitForExit(timeout: .seconds(60)))

            let total = try await after.query("SELECT count(*) FROM herald.notifications")[0].decode(0, as: Int.self)
            // At least once: a batch whose outcomes were committed on neither side of a failover is
            // sent again; at most each loop's claim on each route, per failover.
            let window = 2 * CrashSafetyTests.batch * CrashSafetyTests.concurrency * CrashSafetyTests.routes
            let sends = try await load.checkNothingLost(after, notifications: total, window: window)
            print(
                "pg_auto_failover under load: \(figures.joined(separator: "; ")); \(total) notifications,"
                    + " \(sends); \(producer.failures.load(ordering: .relaxed)) producer commits failed and were"
                    + " tried again; \(reconnects) reconnects")
        }
    }
}

/// A producer committing three notifications every 50 ms (60 a second) through a
/// failover, as an app's backend would, trying again while the database fails over.
final class SteadyProducer: Sendable {
    struct Batch {
        var ids: [Int64]
        var committedAt: ContinuousClock.Instant
    }
    let batches = Mutex<[Batch]>([])
    let failures = Atomic<Int>(0)
    let stopped = Atomic<Bool>(false)

    func run(_ db: PostgresConnection, users: Int) async {
        while !stopped.load(ordering: .relaxed) {
            do {
                let ids = try await db.query(
                    """
                    INSERT INTO herald.notifications (app_id, user_ref, title)
                    SELECT 'crash', 'u' || (1 + (random() * ($1 - 1))::int), 'steady' FROM generate_series(1, 3)
                    RETURNING id
                    """, [users]
                ).map { try $0.decode(0, as: Int64.self) }
                batches.withLock { $0.append(Batch(ids: ids, committedAt: .now)) }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The ids of the first batch committed at or after `instant`.
    func firstCommitted(after instant: ContinuousClock.Instant) -> Set<Int64>? {
        batches.withLock { $0.first { $0.committedAt >= instant }.map { Set($0.ids) } }
    }
}
