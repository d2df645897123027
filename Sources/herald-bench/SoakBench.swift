import ArgumentParser
import Foundation
import HeraldPostgres

/// Sends at a steady rate through `herald.send` for minutes while a daemon runs (after
/// `prepare-e2e --notifications 0`), and every `--sample` seconds prints what a long run at that
/// rate does to the database: the hot tables' size and dead rows, the backlog, the p99 from the
/// producer's commit to FCM's answer, the WAL written, and the longest transaction the daemon
/// held open meanwhile (a long one stops vacuum of every hot table). Ends with the figures that
/// say whether the run stayed flat after its warm-up, and the CPU that retention's backend and
/// autovacuum's workers took.
struct SoakBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak", abstract: "A steady rate for minutes, sampled: size, dead rows, backlog, p99.")

    @OptionGroup var options: CommonOptions
    @Option(help: "Notifications per second.") var rate = 2500
    @Option(help: "How long to send, in seconds.") var seconds = 240
    @Option(help: "Seconds between samples.") var sample = 15
    @Option(help: "Seconds of warm-up: the first sample at or after it is the one later ones are held to.")
    var warmUp = 90
    @Option(help: "Notifications per herald.send statement.") var perStatement = 25
    @Option(help: "Producer connections, taking the schedule's statements in turn.") var producers = 1
    @Option(help: "Users to send to (prepare-e2e made user-1 … user-N).") var users = 20_000

    func run() async throws {
        let url = try options.load().databaseURL
        var connecting: [PostgresConnection] = []
        for _ in 0..<max(producers, 1) { connecting.append(try await PostgresConnection.connect(url)) }
        let producerConnections = connecting
        let sampler = try await PostgresConnection.connect(url)
        let watcher = try await PostgresConnection.connect(url)
        for connection in producerConnections + [sampler, watcher] {
            try await connection.execute("SET application_name = 'herald-bench soak'")
        }
        let produced = Counter()
        let longest = LongestTransaction()
        let cpu = RetentionCPU()
        let start = ContinuousClock.now
        let end = start.advanced(by: .seconds(seconds))
        print(
            "soak: \(rate) notifications/s for \(seconds) s, \(perStatement) per herald.send statement from \(producerConnections.count) connection(s), sampled every \(sample) s"
        )
        print(Sample.header)
        fflush(nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (turn, producer) in producerConnections.enumerated() {
                group.addTask {
                    try await produce(
                        on: producer, turn: turn, of: producerConnections.count, from: start, until: end,
                        counting: produced)
                }
            }
            group.addTask { try await watch(on: watcher, until: end, into: longest, cpu: cpu) }
            group.addTask {
                var samples: [Sample] = []
                var previous = try await Sample.take(
                    on: sampler, at: 0, produced: 0, lag: 0, longest: (0, ""), previous: nil, window: sample)
                var next = start
                while next < end {
                    next = next.advanced(by: .seconds(sample))
                    try await Task.sleep(until: next)
                    let taken = try await Sample.take(
                        on: sampler, at: (next - start).seconds, produced: produced.value, lag: produced.lag,
                        longest: longest.takeWindow(), previous: previous, window: sample)
                    print(taken.line)
                    fflush(nil)  // as it comes, into a file too
                    samples.append(taken)
                    previous = taken
                }
                Sample.summarize(samples, warmUp: Double(warmUp), rate: rate)
                let (retention, autovacuum) = cpu.seconds()
                let notifications = Double(max(produced.value, 1))
                print(
                    String(
                        format:
                            "  retention's PostgreSQL backend: %.1f s of CPU (%.1f µs a notification); autovacuum's workers: %.1f s (%.1f µs a notification)",
                        retention, retention / notifications * 1e6, autovacuum, autovacuum / notifications * 1e6))
            }
            try await group.waitForAll()
        }
    }

    /// One `herald.send` statement of `perStatement` notifications every `perStatement / rate`
    /// seconds, on a schedule: a producer that falls behind catches up, and the lag is reported.
    /// Of `count` producers, the one taking `turn` sends statements turn, turn + count, ….
    private func produce(
        on connection: PostgresConnection, turn: Int, of count: Int, from start: ContinuousClock.Instant,
        until end: ContinuousClock.Instant, counting produced: Counter
    ) async throws {
        let period = Duration.seconds(Double(perStatement) / Double(rate))
        var statement = turn
        while true {
            let due = start.advanced(by: period * statement)
            if due >= end { return }
            if due > .now { try await Task.sleep(until: due) }
            try await connection.query(
                """
                SELECT herald.send('bench', user_ref => 'user-' || (($1::bigint * $2::int + n) % $3::int + 1),
                                   title => 'Soak', body => 'A steady notification', data => '{"order": "42"}')
                FROM generate_series(1, $2::int) AS n
                """, [statement, perStatement, users])
            statement += count
            produced.add(perStatement, lag: (ContinuousClock.now - due).seconds)
        }
    }

    /// Twice a second, the longest transaction the daemon's sessions (application_name `herald`)
    /// hold open, and what it runs.
    private func watch(
        on connection: PostgresConnection, until end: ContinuousClock.Instant, into longest: LongestTransaction,
        cpu: RetentionCPU
    ) async throws {
        while ContinuousClock.now < end {
            let rows = try await connection.query(
                """
                SELECT extract(epoch FROM now() - xact_start)::float8, left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
                FROM pg_stat_activity
                WHERE application_name = 'herald' AND xact_start IS NOT NULL
                ORDER BY xact_start LIMIT 1
                """)
            if let row = rows.first {
                longest.observe(try row.decode(0, as: Double.self), try row.decode(1, as: String.self))
            }
            // Retention's own backend (its last statement names it) and autovacuum's workers,
            // whose CPU /proc keeps per process: what deleting or dropping the old rows costs.
            let backends = try await connection.query(
                """
                SELECT pid, backend_type = 'autovacuum worker' FROM pg_stat_activity
                WHERE backend_type = 'autovacuum worker'
                   OR (application_name = 'herald' AND query ~ 'herald\\.(prune|open_generation|retire_generation)')
                """)
            for backend in backends {
                cpu.observe(
                    pid: try backend.decode(0, as: Int.self),
                    autovacuum: try backend.decode(1, as: Bool.self))
            }
            try await Task.sleep(for: .milliseconds(500))
        }
    }
}

/// What the producer has sent so far, and how far behind its schedule it is now.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var behind = 0.0
    var value: Int { lock.withLock { count } }
    var lag: Double { lock.withLock { behind } }
    func add(_ n: Int, lag: Double) {
        lock.withLock {
            count += n
            behind = lag
        }
    }
}

/// The longest transaction seen since the last sample took it.
private final class LongestTransaction: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds = 0.0
    private var query = ""
    func observe(_ seconds: Double, _ query: String) {
        lock.withLock {
            if seconds > self.seconds { (self.seconds, self.query) = (seconds, query) }
        }
    }
    func takeWindow() -> (Double, String) {
        lock.withLock {
            defer { (seconds, query) = (0, "") }
            return (seconds, query)
        }
    }
}

/// The CPU time of the backends watched, from /proc (the bench runs beside the server): each
/// process counted from when it was first seen to when it was last seen, twice a second, so a
/// short-lived autovacuum worker's first half second is not.
private final class RetentionCPU: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [Int: (first: Int, last: Int, autovacuum: Bool)] = [:]
    private let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    func observe(pid: Int, autovacuum: Bool) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return }
        // After the command's closing parenthesis: state, then utime and stime at 12 and 13.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return }
        lock.withLock {
            let ticks = user + system
            let first = seen[pid].map { $0.first } ?? ticks
            seen[pid] = (first, ticks, autovacuum)
        }
    }

    /// Seconds of CPU: retention's backend, autovacuum's workers.
    func seconds() -> (Double, Double) {
        lock.withLock {
            let retention = seen.values.filter { !$0.autovacuum }.reduce(0) { $0 + $1.last - $1.first }
            let autovacuum = seen.values.filter(\.autovacuum).reduce(0) { $0 + $1.last - $1.first }
            return (Double(retention) / ticksPerSecond, Double(autovacuum) / ticksPerSecond)
        }
    }
}

private struct Sample {
    var at: Double
    var produced: Int
    var lag: Double
    var sizeMB: Double
    var live: Int
    var dead: Int
    var backlog: Int
    var sentPerSecond: Double
    var p99: Double?
    /// The WAL position, in bytes from the start.
    var walPosition: Int64
    var walPerNotification: Double
    var longest: (Double, String)
    /// The dispatch claims so far, their buffers (pages read or hit) and time, from
    /// pg_stat_statements when the server loads it: what a claim costs, window by window.
    var claims: ClaimCost?

    struct ClaimCost {
        var calls: Double
        var buffers: Double
        var milliseconds: Double
    }

    static let header =
        "    s   sent/s  size MB      live      dead  backlog  p99 (last window)  WAL/notif  claim ms  bufs/claim  lag s  longest daemon transaction"

    var line: String {
        let p99 = p99.map { String(format: "%.0f ms", $0 * 1000) } ?? "-"
        return String(format: "%5.0f %8.0f %8.1f %9d %9d %8d ", at, sentPerSecond, sizeMB, live, dead, backlog)
            + String(repeating: " ", count: max(0, 18 - p99.count)) + p99
            + String(format: " %10.0f ", walPerNotification) + claimColumns
            + String(format: " %6.1f  %.2f s ", lag, longest.0) + longest.1
    }

    /// The window's mean time and buffers per dispatch claim, against the sample before it.
    var claimWindow: (milliseconds: Double, buffers: Double)?
    var claimColumns: String {
        claimWindow.map { String(format: "%9.2f %11.0f", $0.milliseconds, $0.buffers) } ?? "        -           -"
    }

    /// The hot tables' size with their indexes, their live and dead rows (the statistics
    /// collector's, up to a second late), the work still waiting, and the deliveries FCM answered
    /// in the last window with their p99 from the producer's commit.
    static func take(
        on connection: PostgresConnection, at: Double, produced: Int, lag: Double, longest: (Double, String),
        previous: Sample?, window: Int
    ) async throws -> Sample {
        let row = try await connection.query(
            """
            WITH hot AS (  -- the tables and, since migration 020, every partition of them
                SELECT relid FROM pg_partition_tree('herald.notifications')
                UNION SELECT relid FROM pg_partition_tree('herald.deliveries')
                UNION SELECT 'herald.notifications'::regclass UNION SELECT 'herald.deliveries'::regclass)
            SELECT (SELECT sum(pg_total_relation_size(relid))::float8 / 1048576 FROM hot),
                   (SELECT sum(s.n_live_tup)::bigint FROM pg_stat_user_tables s JOIN hot USING (relid)),
                   (SELECT sum(s.n_dead_tup)::bigint FROM pg_stat_user_tables s JOIN hot USING (relid)),
                   (SELECT count(*) FROM herald.deliveries WHERE state = 'queued')
                     + (SELECT count(*) FROM herald.notifications WHERE state = 'received'),
                   (SELECT count(*) FROM herald.deliveries WHERE sent_at > now() - make_interval(secs => $1)),
                   (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - n.created_at))
                    FROM herald.deliveries d JOIN herald.notifications n ON n.id = d.notification_id
                    WHERE d.sent_at > now() - make_interval(secs => $1)),
                   pg_current_wal_lsn() - '0/0'
            """, [window])[0]
        let claims = try? await connection.query(
            """
            SELECT coalesce(sum(calls), 0)::float8, coalesce(sum(shared_blks_hit + shared_blks_read), 0)::float8,
                   coalesce(sum(total_exec_time), 0)::float8
            FROM pg_stat_statements WHERE query LIKE '%herald.claim_batch(%'
            """)[0]
        let claimCost = try claims.map {
            ClaimCost(
                calls: try $0.decode(0, as: Double.self), buffers: try $0.decode(1, as: Double.self),
                milliseconds: try $0.decode(2, as: Double.self))
        }
        let wal = Int64(try row.decode(6, as: Double.self))
        let sizeMB = try row.decode(0, as: Double.self)
        let newlyProduced = produced - (previous?.produced ?? 0)
        let walBytes = wal - (previous?.walPosition ?? wal)
        var sample = Sample(
            at: at, produced: produced, lag: lag, sizeMB: sizeMB, live: try row.decode(1, as: Int.self),
            dead: try row.decode(2, as: Int.self), backlog: try row.decode(3, as: Int.self),
            sentPerSecond: Double(try row.decode(4, as: Int.self)) / Double(window),
            p99: try row.decode(5, as: Double?.self),
            walPosition: wal, walPerNotification: newlyProduced > 0 ? Double(walBytes) / Double(newlyProduced) : 0,
            longest: longest, claims: claimCost)
        if let now = claimCost, let before = previous?.claims, now.calls > before.calls {
            let calls = now.calls - before.calls
            sample.claimWindow = (
                (now.milliseconds - before.milliseconds) / calls, (now.buffers - before.buffers) / calls
            )
        }
        return sample
    }

    /// The tests of a flat run, from the first sample after the warm-up to the last.
    static func summarize(_ samples: [Sample], warmUp: Double, rate: Int) {
        guard let first = samples.first(where: { $0.at >= warmUp }), let last = samples.last else { return }
        let steady = samples.filter { $0.at >= warmUp }
        let worstDead = steady.map { Double($0.dead) / Double(max($0.live, 1)) }.max() ?? 0
        let worstBacklog = steady.map(\.backlog).max() ?? 0
        let worstP99 = steady.compactMap(\.p99).max() ?? 0
        let longest = steady.map(\.longest).max { $0.0 < $1.0 } ?? (0, "")
        let produced = Double(last.produced - first.produced) / max(last.at - first.at, 1)
        print("after the warm-up (\(Int(first.at)) s to \(Int(last.at)) s):")
        print(
            String(
                format: "  produced %.0f notifications/s (asked %d); producer %.1f s behind at the end", produced, rate,
                last.lag))
        print(String(format: "  size %.1f MB to %.1f MB: %.2f×", first.sizeMB, last.sizeMB, last.sizeMB / first.sizeMB))
        print(String(format: "  dead rows at most %.2f of live ones", worstDead))
        print("  backlog at most \(worstBacklog)")
        print(
            String(
                format: "  p99 %.0f ms first, at most %.0f ms: %.2f×", (first.p99 ?? 0) * 1000, worstP99 * 1000,
                worstP99 / max(first.p99 ?? 0, 0.001)))
        print(String(format: "  longest daemon transaction %.2f s: ", longest.0) + longest.1)
        let claims = steady.compactMap(\.claimWindow)
        if let slowest = claims.map(\.milliseconds).max(), let most = claims.map(\.buffers).max() {
            print(
                String(
                    format: "  a dispatch claim took at most %.2f ms and %.0f buffers on average over a window",
                    slowest, most))
        }
    }
}
