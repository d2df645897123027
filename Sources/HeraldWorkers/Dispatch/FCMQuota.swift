import Foundation
import HeraldCore
import HeraldPostgres
import Logging

/// An FCM project's sends, kept to one rate by every daemon on the database. FCM's quota is per
/// project (600,000 messages a minute by default), so a fleet that kept a budget in each daemon
/// would send as many times the quota as it has daemons.
///
/// A daemon draws the project's sends from its row in `herald.fcm_quotas`, a second's budget at a
/// time (`herald.draw_fcm_quota`), in chunks of a twentieth of it so that it asks the database
/// about once per chunk, not once per send. What it has not spent when the second ends is lost,
/// never carried over, so the fleet never sends more than a second's budget in any second. A 429
/// for the project's quota pauses it for every daemon (`herald.pause_fcm_project`) for FCM's
/// `Retry-After`, or a minute. While the database cannot be reached, the daemon keeps to the
/// rate on its own, as each daemon did before.
public actor FCMQuota {
    /// Just under FCM's default 600,000 messages a minute.
    public static let defaultRate = 9_900.0

    /// What a caller may do now.
    public enum Grant: Equatable, Sendable {
        /// Send this many (at least one).
        case send(Int)
        /// The project is paused after a 429: nothing goes for `wait`.
        case paused(wait: Duration, reason: String)
    }

    let project: String
    let perSecond: Int
    let connection: PostgresConnection?
    let logger: Logger
    /// Drawn and not yet spent, good until `reserveEnds` (the end of the server's second).
    private var reserve = 0
    private var reserveEnds = ContinuousClock.now
    private var pausedUntil = ContinuousClock.now
    private var pauseReason = ""
    /// The daemon's own budget, while the database cannot be reached.
    private var alone: TokenBucket
    /// The database could not be reached: the daemon keeps to the rate alone until then, before
    /// it asks again.
    private var aloneUntil = ContinuousClock.now
    private var databaseLost = false

    /// `connection` nil: this daemon keeps to `perSecond` alone (a test, a tool).
    public init(project: String, perSecond: Double, connection: PostgresConnection?, logger: Logger) {
        self.project = project
        self.perSecond = max(1, Int(perSecond))
        self.connection = connection
        self.logger = logger
        self.alone = TokenBucket(rate: perSecond)
    }

    /// Up to `wanted` sends, as soon as any may go (waiting for the next second when this one's
    /// budget is spent); or, while the project is paused, for how long.
    public func take(upTo wanted: Int) async -> Grant {
        while true {
            let now = ContinuousClock.now
            if now < pausedUntil { return .paused(wait: pausedUntil - now, reason: pauseReason) }
            if now < reserveEnds && reserve > 0 {
                let granted = min(reserve, wanted)
                reserve -= granted
                return .send(granted)
            }
            guard let connection, now >= aloneUntil else { return await takeAlone(wanted) }
            let chunk = max(wanted, perSecond / 20)
            let granted: Int
            let goodFor: Double
            let pausedFor: Double?
            let reason: String?
            do {
                let row = try await connection.query(SQL.draw, [project, chunk, perSecond])[0]
                (granted, goodFor) = (try row.decode("granted"), try row.decode("good_for"))
                (pausedFor, reason) = (try row.decode("paused_for"), try row.decode("paused_reason"))
                if databaseLost {
                    databaseLost = false
                    logger.info("FCM quota shared with the fleet again", metadata: ["project": "\(project)"])
                }
            } catch {
                aloneUntil = now + .seconds(1)
                if !databaseLost {
                    databaseLost = true
                    logger.warning(
                        "FCM quota: the database cannot be reached; this daemon keeps to the rate alone",
                        metadata: ["project": "\(project)", "rate": "\(perSecond)", "error": "\(error)"])
                }
                return await takeAlone(wanted)
            }
            if let pausedFor {
                pause(until: now + .seconds(pausedFor), reason: reason ?? "paused")
                continue
            }
            // Counted from before the draw: the second ends no later than this here.
            let ends = now + .seconds(goodFor)
            if granted == 0 {
                if Task.isCancelled { return .paused(wait: .seconds(1), reason: "the daemon is stopping") }
                try? await Task.sleep(until: ends)
                continue
            }
            let sent = min(granted, wanted)
            // Another take may have drawn meanwhile: keep the newer second's reserve only.
            if ends >= reserveEnds {
                reserve = granted - sent
                reserveEnds = ends
            }
            return .send(sent)
        }
    }

    /// FCM answered 429 for the project's quota: every daemon waits `duration` before its next
    /// send of the project.
    public func overQuota(for duration: Duration, reason: String) async {
        if ContinuousClock.now >= pausedUntil {
            logger.warning(
                "FCM project over its quota: every daemon waits",
                metadata: ["project": "\(project)", "seconds": "\(Int(duration.seconds))", "reason": "\(reason)"])
        }
        pause(until: .now + duration, reason: reason)
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
        let (granted, wait) = alone.take(upTo: wanted, now: .now)
        // Taken already, so a caller after this one waits behind it.
        if wait > .zero { try? await Task.sleep(for: wait) }
        return .send(granted)
    }

    private func pause(until: ContinuousClock.Instant, reason: String) {
        if until > pausedUntil {
            pausedUntil = until
            pauseReason = reason
        }
        reserve = 0
    }

    enum SQL {
        /// Up to $2 sends of project $1 at $3 a second for the fleet (`herald.draw_fcm_quota`,
        /// `migrations/functions/dispatch.sql`); how many, for how many seconds, or how long the
        /// project is paused and why.
        static let draw = """
            SELECT granted, extract(epoch FROM good_for)::float8 AS good_for,
                   extract(epoch FROM paused_for)::float8 AS paused_for, paused_reason
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
    private var updated = ContinuousClock.now

    init(rate: Double) {
        self.rate = rate
        self.tokens = rate
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
