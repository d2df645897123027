import Foundation
import HeraldAPNs
import HeraldCore

extension DispatchWorker {
    /// Sends one app's deliveries to iOS devices with APNs device tokens, straight to APNs;
    /// returns their results and the configuration problems APNs' answers show.
    func sendAPNs(_ batch: [OutgoingDelivery], app: String, builder: PayloadBuilder, now: Date) async -> (
        [(Int64, DeliveryResult)], [ConfigurationScope: String]
    ) {
        guard let senders = context.senders else { return unsendable(batch, "no senders configured", scope: .apns) }
        let client: APNsClient
        switch await senders.apns(app: app, setup: APNsSetup(batch[0])) {
        case .failure(let problem): return unsendable(batch, problem.description, scope: .apns)
        case .success(let made): client = made
        }
        await noteCertificate(of: app, senders: senders, now: now)
        // APNs has no validate-only request: a dry run is built, not sent.
        var results: [(Int64, DeliveryResult)] = batch.filter(\.dryRun).map {
            ($0.deliveryID, DeliveryResult(state: .validated))
        }
        let live = batch.filter { !$0.dryRun }
        var problems: [ConfigurationScope: String] = [:]
        if !live.isEmpty {
            let outcomes = Self.suspectingEnvironment(
                await timed { await client.send(live.map { builder.apns(for: $0, now: now) }) })
            results += self.results(live, outcomes, dryRun: false, answeredAt: context.clock.now(), problems: &problems)
        }
        return (results, problems)
    }

    /// Push certificates expire yearly and then fail every send: the expiry read at load goes to
    /// `herald.apps` (so `herald.app_problems` and `herald status` warn 30 days ahead), and the
    /// log says so once a day.
    func noteCertificate(of app: String, senders: Senders, now: Date) async {
        guard let news = await senders.certificateNews(app: app, now: now) else { return }
        if news.record {
            do {
                try await context.connection.query(SQL.recordCertificateExpiry, [app, news.expiry])
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

    /// BadDeviceToken is also APNs' answer to a token of the other environment (a development
    /// build's token sent to production). When every send of a batch got it, the app's
    /// environment is the likelier fault than all its devices at once: a configuration problem,
    /// and no device is disabled.
    static func suspectingEnvironment(_ outcomes: [PushOutcome]) -> [PushOutcome] {
        let refused = outcomes.filter {
            if case .tokenInvalid(let reason, _) = $0 { return reason.contains("BadDeviceToken") }
            return false
        }
        guard refused.count >= 2, refused.count == outcomes.count else { return outcomes }
        let reason =
            "APNs answered BadDeviceToken to every device of the batch: is apns_environment right"
            + " (a development build's tokens need 'development')?"
        return outcomes.map { _ in .configurationError(reason: reason, scope: .apns) }
    }
}

/// An app's APNs setup, as a claimed delivery carries it.
struct APNsSetup: Equatable {
    var environment: String
    var bundleID: String?
    var teamID: String?
    var keyID: String?
    var keyFile: String?
    var certificateFile: String?

    init(_ delivery: OutgoingDelivery) {
        environment = delivery.apnsEnvironment ?? "production"
        bundleID = delivery.apnsBundleID
        teamID = delivery.apnsTeamID
        keyID = delivery.apnsKeyID
        keyFile = delivery.apnsKeyFile
        certificateFile = delivery.apnsCertificateFile
    }
}
