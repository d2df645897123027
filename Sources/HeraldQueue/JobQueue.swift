import Foundation
import HeraldCore
import HeraldPostgres

/// The durable job queue in `herald.jobs`: batch claims with a lease, batched completion,
/// retries with backoff, a dead state, release and lease rescue.
///
/// A queue holds one connection; give each concurrently running worker its own queue so
/// that claims and completions do not wait on each other.
public struct JobQueue: Sendable {
    public let connection: PostgresConnection
    /// Written into `locked_by`, so that operators see who holds a job.
    public let workerID: String
    public let clock: any WallClock
    public var backoff: Backoff
    /// How long a claim is leased before lease rescue may hand it to someone else.
    public var lease: Duration

    public static let defaultLease: Duration = .seconds(60)

    public init(
        connection: PostgresConnection,
        workerID: String,
        clock: any WallClock = SystemClock(),
        backoff: Backoff = Backoff(),
        lease: Duration = JobQueue.defaultLease
    ) {
        self.connection = connection
        self.workerID = workerID
        self.clock = clock
        self.backoff = backoff
        self.lease = lease
    }

    /// Adds one job. Producers normally insert with SQL; this is for Herald's own workers.
    @discardableResult
    public func enqueue(
        kind: String, ref: Int64? = nil, payload: String = "{}", runAt: Date? = nil, maxAttempts: Int? = nil
    ) async throws -> Int64 {
        try await connection.query(SQL.enqueue, [kind, ref, payload, runAt, maxAttempts ?? Backoff.maxAttempts])[0]
            .decode(0, as: Int64.self)
    }

    /// Leases up to `limit` ready jobs of `kind`, oldest first.
    public func claim(kind: String, limit: Int) async throws -> [Job] {
        let result = try await connection.query(
            SQL.claim, [kind, clock.now(), limit, workerID, lease.seconds], planning: .eachCall)
        return try result.map { row in
            Job(
                id: try row.decode("id", as: Int64.self),
                kind: kind,
                ref: try row.decode("ref", as: Int64?.self),
                payload: try row.decode("payload", as: String.self),
                attempts: try row.decode("attempts", as: Int.self),
                maxAttempts: try row.decode("max_attempts", as: Int.self))
        }
    }

    /// Records the outcome of every job in a batch with one statement.
    public func finish(_ outcomes: [(job: Job, outcome: JobOutcome)]) async throws {
        guard !outcomes.isEmpty else { return }
        let now = clock.now()
        var completed: [Int64] = []
        var failedIDs: [Int64] = []
        var runAt: [Date] = []
        var errors: [String] = []
        var giveUp: [Bool] = []
        var postponed: [Bool] = []
        completed.reserveCapacity(outcomes.count)
        for (job, outcome) in outcomes {
            switch outcome {
            case .completed:
                completed.append(job.id)
            case .retry(let error, let notBefore):
                let delay = backoff.delay(afterAttempts: job.attempts, atLeast: Self.bounded(notBefore ?? .zero))
                failedIDs.append(job.id)
                runAt.append(now.addingTimeInterval(delay.seconds))
                errors.append(
                    Self.storable(job.isLastAttempt ? "gave up after \(job.attempts) attempts: \(error)" : error))
                giveUp.append(false)
                postponed.append(false)
            case .dead(let reason):
                failedIDs.append(job.id)
                runAt.append(now)
                errors.append(Self.storable(reason))
                giveUp.append(true)
                postponed.append(false)
            case .postpone(let delay, let reason):
                failedIDs.append(job.id)
                runAt.append(now.addingTimeInterval(Self.bounded(delay).seconds))
                errors.append(Self.storable(reason))
                giveUp.append(false)
                postponed.append(true)
            }
        }
        if failedIDs.isEmpty {
            try await connection.query(SQL.complete, [completed], planning: .eachCall)
        } else {
            try await connection.query(
                SQL.finish, [completed, failedIDs, runAt, errors, giveUp, now, workerID, postponed],
                planning: .eachCall)
        }
    }

    /// The longest a job waits before it runs again, whatever its outcome asks (a server's
    /// `Retry-After` of years, or a value gone wrong): its `run_at` stays a time PostgreSQL can
    /// hold, and the job comes back within a day.
    public static let longestWait: Duration = .seconds(86_400)

    static func bounded(_ wait: Duration) -> Duration { min(max(wait, .zero), longestWait) }

    /// Text as PostgreSQL text can hold it: a NUL (a provider's answer may hold one) becomes U+FFFD.
    static func storable(_ text: String) -> String {
        text.utf8.contains(0) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    /// Hands jobs back without counting the attempt, for a shutdown that cannot finish them.
    public func release(_ jobs: [Job]) async throws {
        guard !jobs.isEmpty else { return }
        try await connection.query(SQL.release, [jobs.map(\.id), workerID], planning: .eachCall)
    }

    /// Returns jobs whose lease expired to ready (or dead, when out of attempts).
    public func rescueExpiredLeases(limit: Int = 1000) async throws -> RescueReport {
        let result = try await connection.query(SQL.rescue, [clock.now(), limit], planning: .eachCall)
        var report = RescueReport()
        for row in result {
            let kind = try row.decode("kind", as: String.self)
            if try row.decode("state", as: String.self) == "dead" {
                report.dead[kind, default: 0] += 1
            } else {
                report.rescued[kind, default: 0] += 1
            }
        }
        return report
    }
}

/// What one lease-rescue pass did, by job kind.
public struct RescueReport: Sendable, Equatable {
    public var rescued: [String: Int] = [:]
    public var dead: [String: Int] = [:]
    public var isEmpty: Bool { rescued.isEmpty && dead.isEmpty }
    public init() {}
}
