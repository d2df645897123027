import Foundation
import HeraldPostgres
import Synchronization

/// Push certificates expire yearly and then fail every send: each certificate's expiry, read
/// when an app's route is made, goes to `herald.app_apns` (so `herald.app_problems` and
/// `herald status` warn 30 days ahead), and the log says so once a day. One per daemon, shared by
/// its APNs routes (``Senders/shared(_:make:)``).
final class APNsCertificates: Sendable {
    private struct News {
        var expiry: Date
        /// Not yet written to `herald.app_apns`.
        var unrecorded: Bool
        var warnedAt: ContinuousClock.Instant?
    }
    private let byApp = Mutex<[String: News]>([:])

    /// A certificate was loaded for `app`: its expiry is news.
    func loaded(app: String, expiry: Date) {
        byApp.withLock { $0[app] = News(expiry: expiry, unrecorded: true, warnedAt: $0[app]?.warnedAt) }
    }

    /// Records the app's certificate expiry once after each load, and warns at most once a day
    /// while it is less than 30 days away.
    func report(app: String, _ context: WorkerContext) async {
        let now = context.clock.now()
        let instant = context.monotonicClock.now
        let news: (expiry: Date, record: Bool, warn: Bool)? = byApp.withLock { byApp in
            guard var entry = byApp[app] else { return nil }
            let record = entry.unrecorded
            entry.unrecorded = false
            var warn = false
            if entry.expiry.timeIntervalSince(now) < 30 * 86_400,
                entry.warnedAt.map({ instant - $0 >= .seconds(86_400) }) ?? true
            {
                entry.warnedAt = instant
                warn = true
            }
            byApp[app] = entry
            return (entry.expiry, record, warn)
        }
        guard let news else { return }
        if news.record {
            do {
                try await context.connection.query(Self.recordExpiry, [app, news.expiry])
            } catch {
                context.logger.warning(
                    "could not record the APNs certificate's expiry", metadata: ["app": "\(app)", "error": "\(error)"])
            }
        }
        if news.warn {
            let days = Int((news.expiry.timeIntervalSince(now) / 86_400).rounded(.up))
            context.logger.warning(
                days > 0
                    ? "the app's APNs certificate expires soon: renew it" : "the app's APNs certificate has expired",
                metadata: ["app": "\(app)", "expires_at": "\(news.expiry)", "days_left": "\(max(0, days))"])
        }
    }

    /// $1 app, $2 when its APNs certificate expires, as read from the file
    /// (`herald.record_apns_certificate_expiry`, `migrations/functions/apps.sql`).
    static let recordExpiry = "SELECT herald.record_apns_certificate_expiry($1, $2)"
}
