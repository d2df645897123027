import Foundation
import HeraldCore
import HeraldFCM

extension DispatchWorker {
    /// Sends one app's deliveries of one FCM route; returns their results and the
    /// configuration problems FCM's answers show.
    func sendFCM(_ batch: [OutgoingDelivery], app: String, builder: PayloadBuilder, now: Date) async -> (
        [(Int64, DeliveryResult)], [ConfigurationScope: String]
    ) {
        guard let senders = context.senders else { return unsendable(batch, "no senders configured", scope: .fcm) }
        let first = batch[0]
        let sender: Senders.Sender
        switch await senders.sender(app: app, project: first.fcmProjectID, credentialsFile: first.credentialsFile) {
        case .failure(let problem): return unsendable(batch, problem.description, scope: .fcm)
        case .success(let made): sender = made
        }
        var results: [(Int64, DeliveryResult)] = []
        var problems: [ConfigurationScope: String] = [:]
        for dryRun in [false, true] {
            let part = batch.filter { $0.dryRun == dryRun }
            if part.isEmpty { continue }
            await sender.limiter.acquire(part.count)
            let outcomes = await timed {
                await sender.client.send(part.map { builder.message(for: $0, now: now) }, validateOnly: dryRun)
            }
            results += self.results(
                part, outcomes, dryRun: dryRun, answeredAt: context.clock.now(), problems: &problems)
        }
        return (results, problems)
    }
}
