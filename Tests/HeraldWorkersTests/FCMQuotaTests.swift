import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldStatus
import HeraldTestSupport
import HeraldWorkers
import Logging
import Synchronization
import Testing

/// An FCM project's quota, drawn by several daemons (here, several ``FCMQuota``s on their own
/// connections) from one row.
@Suite struct FCMQuotaTests {
    /// Two daemons taking as fast as they can get no more, together, than the project's rate:
    /// a second's worth at once, then the rate (each on its own budget would get twice that).
    @Test func twoDaemonsTogetherKeepToTheRate() async throws {
        let database = try await TestDatabase.create()
        let rate = 100
        var quotas: [FCMQuota] = []
        for _ in 0..<2 {
            quotas.append(
                FCMQuota(
                    project: "shop-prod", perSecond: Double(rate), connection: try await database.connect(),
                    logger: Logger(label: "test")))
        }
        let start = ContinuousClock.now
        let taken = await withTaskGroup(of: Int.self) { [quotas] group in
            // Each daemon's dispatch loops and routes take from its quota at once.
            for quota in quotas + quotas + quotas {
                group.addTask {
                    // Three seconds, and on past them (up to 30 s) until it got some: on a busy
                    // machine a first draw has taken longer than the three.
                    var taken = 0
                    while ContinuousClock.now - start < .seconds(taken == 0 ? 30 : 3) {
                        if case .send(let count) = await quota.take(upTo: 7) { taken += count }
                    }
                    return taken
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = (ContinuousClock.now - start).seconds
        // Seconds of the server's clock begun meanwhile, each a budget; a grant drawn in the last
        // one may end after the daemon stopped asking.
        let budget = Double(rate) * (elapsed.rounded(.up) + 1)
        #expect(Double(taken.reduce(0, +)) <= budget, "\(taken) in \(elapsed) s")
        #expect(taken.allSatisfy { $0 > 0 }, "every caller got some: \(taken)")
    }

    /// A 429 seen by one daemon pauses the project for the others, with FCM's words; an
    /// operator's per_second for the project overrides the daemons' rate.
    @Test func a429PausesTheProjectForEveryDaemon() async throws {
        let database = try await TestDatabase.create()
        let first = FCMQuota(
            project: "shop-prod", perSecond: 100, connection: try await database.connect(),
            logger: Logger(label: "test"))
        let second = FCMQuota(
            project: "shop-prod", perSecond: 100, connection: try await database.connect(),
            logger: Logger(label: "test"))
        // A twentieth of the rate, as a daemon draws it: nothing is left over in this second.
        #expect(await second.take(upTo: 5) == .send(5))
        let pausedAt = ContinuousClock.now
        await first.overQuota(for: .seconds(30), reason: "429 RESOURCE_EXHAUSTED: Quota exceeded")
        guard case .paused(let wait) = await second.take(upTo: 1) else {
            Issue.record("the second daemon was not paused"); return
        }
        // The rest of the 30 s pause, less what a loaded machine took to get here (counted
        // twice: a draw that stalled is late both to read the clock and to answer).
        let since = ContinuousClock.now - pausedAt
        #expect(wait > .seconds(29) - since * 2 && wait <= .seconds(30), "\(wait), \(since) after the 429")

        // Operators see it in `herald status`, with FCM's words.
        let db = try await database.connect()
        let problems = try await StatusReport.load(db).problems(maximumReadyAge: 60)
        #expect(
            problems.contains {
                $0.hasPrefix("FCM project shop-prod: over its quota, every daemon waits until")
                    && $0.contains("(FCM: 429 RESOURCE_EXHAUSTED: Quota exceeded)")
            },
            "\(problems)")
        try await db.execute("INSERT INTO herald.fcm_quotas (project_id, per_second) VALUES ('other', 4)")
        let other = FCMQuota(project: "other", perSecond: 100, connection: db, logger: Logger(label: "test"))
        let granted = await other.take(upTo: 10)
        #expect(granted == .send(4), "the project's own per_second, not the daemons' 100")
    }

    /// Without the database (a failover), a daemon keeps to the rate alone rather than stop. Its
    /// waits are on a clock the test moves, 10 ms at a time while a take waits.
    @Test func withoutTheDatabaseADaemonKeepsToTheRateAlone() async throws {
        let clock = ManualClock()
        let unreachable = PostgresConnection(conninfo: "host=127.0.0.1 port=1 dbname=none connect_timeout=1")
        let quota = FCMQuota(
            project: "p", perSecond: 50, connection: unreachable, logger: Logger(label: "test"),
            clock: clock.monotonic)
        let start = clock.instant
        let done = Atomic<Bool>(false)
        let taking = Task {
            defer { done.store(true, ordering: .sequentiallyConsistent) }
            var taken = 0
            while taken < 100 {
                guard case .send(let count) = await quota.take(upTo: 10) else { return -1 }
                taken += count
            }
            return taken
        }
        while !done.load(ordering: .sequentiallyConsistent) {
            await clock.sleepers(atLeast: 1, timeout: .milliseconds(200))
            if clock.sleeping > 0 { clock.advance(by: .milliseconds(10)) }
        }
        #expect(await taking.value == 100, "paused without a database")
        // 50 a second, from an empty budget: ten takes of ten, 200 ms each.
        #expect(clock.instant - start == .seconds(2))
    }
}
