import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Three daemons on one database send through one FCM project: together they keep to its
/// quota, and a 429 for the project holds all three back.
@Suite struct FleetQuotaTests {
    static let daemons = 3

    /// Runs three daemons against `load` with `rate` sends a second for the project (the fleet's
    /// HERALD_FCM_RATE_LIMIT), until `body` returns; then stops them.
    static func withThreeDaemons(
        _ load: CrashLoad, conninfo: String, rate: Int, _ body: ([HeraldProcess]) async throws -> Void
    ) async throws {
        var environment = load.daemonEnvironment(conninfo, lease: "30s", rescueInterval: "1s")
        environment["HERALD_FCM_RATE_LIMIT"] = "\(rate)"
        environment["HERALD_HTTP_ADDRESS"] = "off"
        environment["HERALD_METRICS_ADDRESS"] = "off"
        let fleet = try (1...daemons).map { index in
            var own = environment
            own["HERALD_WORKER_ID"] = "daemon-\(index)"
            return try HeraldProcess(["run"], environment: own)
        }
        defer { fleet.forEach { $0.send(SIGKILL) } }
        try await body(fleet)
        for daemon in fleet { daemon.send(SIGTERM) }
        for daemon in fleet { #expect(await daemon.waitForExit(timeout: .seconds(60))) }
    }

    /// Each second of the clock, how many of the project's sends the stand-in took.
    static func sendsBySecond(_ emulator: Emulator) async -> [Int: Int] {
        var bySecond: [Int: Int] = [:]
        for message in await emulator.received { bySecond[Int(message.at.timeIntervalSince1970), default: 0] += 1 }
        return bySecond
    }

    @Test func threeDaemonsTogetherKeepToTheProjectsRate() async throws {
        try await takingTurns {
            let count = 1200
            let rate = 150
            let database = try await TestDatabase.create()
            let db = try await database.connect()
            let load = try await CrashLoad.start(db, notifications: count)
            defer { load.accountFile.remove() }
            try await Self.withThreeDaemons(load, conninfo: database.conninfo, rate: rate) { fleet async throws in
                #expect(
                    try await CrashLoad.finishes(db, within: .seconds(90)),
                    "\(fleet.map { $0.output.suffix(1500) })")
            }
            let bySecond = await Self.sendsBySecond(load.emulator)
            let busiest = bySecond.values.max() ?? 0
            print(
                "fleet quota: \(Self.daemons) daemons at \(rate)/s for the fleet sent \(count) in \(bySecond.count) s;"
                    + " busiest second \(busiest)")
            // A send drawn at the end of a second may arrive in the next one (later still on a
            // busy machine), so one second can hold more than the rate; each daemon on its own
            // budget sent three times the rate.
            #expect(busiest <= 2 * rate, "\(bySecond.sorted { $0.key < $1.key })")
            #expect(bySecond.count >= count / rate, "\(bySecond.sorted { $0.key < $1.key })")
            #expect(await load.emulator.received.count == count)
        }
    }

    @Test func a429ForTheProjectHoldsBackEveryDaemon() async throws {
        try await takingTurns {
            let count = 900
            let retryAfter = 10
            let database = try await TestDatabase.create()
            let db = try await database.connect()
            let load = try await CrashLoad.start(db, notifications: count)
            defer { load.accountFile.remove() }
            // FCM takes 100 a second of a project the fleet believes may send 300.
            await load.emulator.setProjectQuota("crash", perSecond: 100, retryAfter: retryAfter)
            try await Self.withThreeDaemons(load, conninfo: database.conninfo, rate: 300) { fleet async throws in
                let refused = try await eventually(timeout: .seconds(30)) {
                    await !load.emulator.quotaRefusals(project: "crash").isEmpty
                }
                try #require(refused, "\(fleet.map { $0.output.suffix(1500) })")
                let first = await load.emulator.quotaRefusals(project: "crash")[0]
                try await Task.sleep(for: .seconds(retryAfter))
                // From a few seconds after the first refusal (a daemon may spend what it drew in
                // the second it learns of the pause, and a busy machine delays sends) until the
                // pause ends, no daemon sends.
                let quiet = first.addingTimeInterval(3)...first.addingTimeInterval(Double(retryAfter) - 1)
                let sentMeanwhile = await load.emulator.received.filter { quiet.contains($0.at) }.count
                let refusedMeanwhile = await load.emulator.quotaRefusals(project: "crash").filter {
                    quiet.contains($0)
                }.count
                #expect(sentMeanwhile + refusedMeanwhile == 0, "sent \(sentMeanwhile), refused \(refusedMeanwhile)")
                // FCM takes everything again: every delivery ends sent, none the worse for waiting.
                await load.emulator.setProjectQuota("crash", perSecond: nil)
                #expect(
                    try await CrashLoad.finishes(db, within: .seconds(90)),
                    "\(fleet.map { $0.output.suffix(1500) })")
            }
            let states = try await db.query("SELECT state, count(*) FROM herald.deliveries GROUP BY state")
            let onlyState = try states[0].decode(0, as: String.self)
            #expect(states.count == 1 && onlyState == "sent")
            // Waiting with the project cost no attempt (a send FCM never answered, on a busy
            // machine, is an attempt and says so).
            let spent = try await db.query(
                """
                SELECT count(*) FROM herald.deliveries
                WHERE attempts > 1 AND array_to_string(error_history, ' ') !~ 'FCM (unreachable|did not answer in time)'
                """)[0].decode(0, as: Int.self)
            #expect(spent == 0)
            let waited = try await db.query(
                """
                SELECT count(*) FROM herald.deliveries
                WHERE array_to_string(error_history, ' ') LIKE '%holds the sender back%'
                   OR last_error LIKE '%holds the sender back%'
                """)[0].decode(0, as: Int.self)
            let refusals = await load.emulator.quotaRefusals(project: "crash").count
            print(
                "fleet quota: a 429 (Retry-After: \(retryAfter)) held back all \(Self.daemons) daemons;"
                    + " \(refusals) sends refused, \(waited) deliveries waited with the project")
            #expect(waited > 0)
        }
    }
}
