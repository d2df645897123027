import Foundation
import HeraldCore
import HeraldPostgres
import Logging

/// An FCM project's sends, kept to one rate by every daemon on the database. FCM's quota is per
/// project (600,000 messages a minute by default), so a fleet that kept a budget in each daemon
/// would send as many times the quota as it has daemons.
///
/// A daemon draws the project's sends from its row in `herald.fcm_quotas`, a second's budget at a
/// time (`herald.draw_fcm_quota`), in chunks of a twentieth of it (or what a caller wants, if
/// more), so that it asks the database about once per chunk, not once per send; one draw at a
/// time, which every caller waiting shares. What it has not spent when the second ends is
/// lost, never carried over, so the fleet never draws more than a second's budget for a
/// second. A 429 for the project's quota pauses it for every daemon
/// (`herald.pause_fcm_project`). While the database cannot be reached, the daemon keeps to the
/// rate on its own, as each daemon did before.
public actor FCMQuota {
    /// Just under FCM's default 600,000 messages a minute.
    public static let defaultRate = 9_900.0

    /// What a caller may do now.
    public enum Grant: Equatable, Sendable {
        /// Send this many (at least one).
        case send(Int)
        /// Send nothing for `wait`: the project is paused after a 429 (or the daemon is stopping).
        case paused(wait: Duration)
    }

    let project: String
    /// The daemons' rate (`HERALD_FCM_RATE_LIMIT`); the project's row may set its own.
    let perSecond: Int
    let connection: PostgresConnection?
    let logger: Logger
    /// Drawn and not yet spent, for the server's second `reserveSecond`, good until
    /// `reserveEnds` here.
    private var reserve = 0
    private var reserveSecond = Date.distantPast
    private var reserveEnds: ContinuousClock.Instant
    /// The last draw got less than it asked for: the fleet has spent this second's budget.
    private var spent = false
    private var pausedUntil: ContinuousClock.Instant
    /// The draw in flight, which the other callers wait for.
    private var drawing: Task<Void, Never>?
    /// The project's rate as the database last gave it.
    private var rate: Int
    /// The daemon's own budget: while the database cannot be reached (asked again from
    /// `aloneUntil`), or always without a connection.
    private var alone: TokenBucket?
    private var aloneUntil: ContinuousClock.Instant
    private var sessionReady = false

    /// The elapsed time its seconds, pauses and waits are counted on.
    private let clock: any MonotonicClock

    /// `connection` nil: this daemon keeps to `perSecond` alone (a test, a tool).
    public init(
        project: String, perSecond: Double, connection: PostgresConnection?, logger: Logger,
        clock: any MonotonicClock = ContinuousClock()
    ) {
        self.clock = clock
        (reserveEnds, pausedUntil, aloneUntil) = (clock.now, clock.now, clock.now)
        self.project = project
        self.perSecond = max(1, Int(min(perSecond, Double(Int32.max))))
        self.rate = self.perSecond
        self.connection = connection
        self.logger = logger
        if connection == nil { alone = TokenBucket(rate: Double(self.perSecond), full: true, now: clock.now) }
    }

    /// Up to `wanted` sends, as soon as any may go (waiting for the next second when this one's
    /// budget is spent); or, while the project is paused, for how long.
    public func take(upTo wanted: Int) async -> Grant {
        while true {
            let now = clock.now
            if now < pausedUntil { return .paused(wait: pausedUntil - now) }
            if Task.isCancelled { return .paused(wait: .seconds(1)) }
            if now < reserveEnds && reserve > 0 {
                let granted = min(reserve, wanted)
                reserve -= granted
                return .send(granted)
            }
            guard let connection, now >= aloneUntil else { return await takeAlone(wanted) }
            if let drawing {
                await drawing.value
                continue
            }
            if spent && now < reserveEnds {
                // This second's budget is spent, for the whole fleet.
                try? await clock.sleep(until: reserveEnds)
                continue
            }
            let draw = Task { await self.draw(max(wanted, perSecond / 20), on: connection) }
            drawing = draw
            await draw.value
        }
    }

    private func draw(_ chunk: Int, on connection: PostgresConnection) async {
        // Done before the draw's waiters resume: one that found it still set would wait on it
        // again and again, without giving way to the actor.
        defer { drawing = nil }
        let asked = clock.now
        do {
            if !sessionReady {
                try await connection.addSetupStatement(SQL.session)
                sessionReady = true
            }
            let row = try await connection.query(SQL.draw, [project, chunk, perSecond])[0]
            let granted: Int = try row.decode("granted")
            let second: Date = try row.decode("this_second")
            let goodFor: Double = try row.decode("good_for")
            let pausedFor: Double? = try row.decode("paused_for")
            rate = try row.decode("rate")
            if alone != nil {
                alone = nil
                logger.info("FCM quota drawn with the fleet again", metadata: ["project": "\(project)"])
            }
            if let pausedFor {
                pause(until: asked + .seconds(pausedFor))
                return
            }
            if second != reserveSecond {
                reserve = 0
                reserveSecond = second
            }
            // Counted from before the draw, so it ends here no later than on the server.
            reserveEnds = asked + .seconds(goodFor)
            reserve += granted
            spent = granted < chunk
        } catch {
            aloneUntil = clock.now + .seconds(1)
            guard alone == nil else { return }
            // Starting empty, at the project's rate as last drawn: no second's worth more than the fleet's.
            alone = TokenBucket(rate: Double(rate), full: false, now: clock.now)
            if let error = error as? PostgresError, error.isTransient {
                logger.warning(
                    "FCM quota: the database cannot be reached; this daemon keeps to the project's rate alone",
                    metadata: ["project": "\(project)", "rate": "\(rate)", "error": "\(error)"])
            } else {
                logger.error(
                    "FCM quota: drawing failed; this daemon keeps to the project's rate alone",
                    metadata: ["project": "\(project)", "rate": "\(rate)", "error": "\(error)"])
            }
        }
    }

    /// FCM answered 429 for the project's quota: every daemon waits `duration` before its next
    /// send of the project.
    public func overQuota(for duration: Duration, reason: String) async {
        let until = clock.now + duration
        guard until > pausedUntil + .seconds(1) else { return }
        logger.warning(
            "FCM project over its quota: every daemon waits",
            metadata: ["project": "\(project)", "seconds": "\(Int(duration.seconds))", "reason": "\(reason)"])
        pause(until: until)
        guard let connection else { return }
        do {
            try await connection.query(SQL.pause, [project, duration.seconds, reason])
        } catch {
            logger.warning(
                "FCM quota: could not tell the fleet the project is paused",
                metadata: ["project": "\(project)", "error": "\(error)"])
        }
    }

    /// Without the database: the daemon's own budget.
    private func takeAlone(_ wanted: Int) async -> Grant {
        var bucket = alone ?? TokenBucket(rate: Double(rate), full: false, now: clock.now)
        let (granted, wait) = bucket.take(upTo: wanted, now: clock.now)
        alone = bucket
        // Taken already, so a caller after this one waits behind it.
        if wait > .zero { try? await clock.sleep(for: wait) }
        return .send(granted)
    }

    private func pause(until: ContinuousClock.Instant) {
        pausedUntil = max(pausedUntil, until)
        reserve = 0
    }

    enum SQL {
        /// The quota's session: a draw that waits longer than a second or two (a lock held by a
        /// stalled session, a server going away) is better given up for the daemon's own budget;
        /// and a draw need not wait for its commit to be durable (a crash loses a second's count).
        static let session = "SET statement_timeout = '2s'; SET synchronous_commit = off"
        /// Up to $2 sends of project $1 at $3 a second for the fleet (`herald.draw_fcm_quota`,
        /// `migrations/functions/dispatch.sql`).
        static let draw = """
            SELECT granted, this_second, extract(epoch FROM good_for)::float8 AS good_for,
                   extract(epoch FROM paused_for)::float8 AS paused_for, rate
            FROM herald.draw_fcm_quota($1, $2, $3)
            """
        /// Pauses project $1 for $2 seconds for every daemon, FCM's words $3.
        static let pause = "SELECT herald.pause_fcm_project($1, make_interval(secs => $2), $3)"
    }
}

/// At most `rate` a second on average, in bursts of up to one second's worth.
struct TokenBucket {
    let rate: Double
    private var tokens: Double
    private var updated: ContinuousClock.Instant

    /// `full`: a second's worth at once; otherwise none until they come, from `now`.
    init(rate: Double, full: Bool, now: ContinuousClock.Instant) {
        self.rate = rate
        self.tokens = full ? rate : 0
        updated = now
    }

    /// Takes up to `wanted` (at most a second's worth) at once; returns how many, and how long
    /// to wait before sending them (until the bucket's debt is paid).
    mutating func take(upTo wanted: Int, now: ContinuousClock.Instant) -> (granted: Int, wait: Duration) {
        let granted = max(1, min(wanted, Int(rate)))
        tokens = min(rate, tokens + (now - updated).seconds * rate) - Double(granted)
        updated = now
        return (granted, tokens < 0 ? .seconds(-tokens / rate) : .zero)
    }
}
