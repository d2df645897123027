import Foundation
import HeraldCore
import HeraldWebPush

extension DispatchWorker {
    /// Sends one app's deliveries to browsers; returns their results and the configuration
    /// problems the push services' answers show. A dry run is checked and encrypted but not
    /// sent: Web Push has no validate-only request.
    func sendWebPush(_ batch: [OutgoingDelivery], app: String, builder: PayloadBuilder, now: Date) async -> (
        [(Int64, DeliveryResult)], [ConfigurationScope: String]
    ) {
        guard let senders = context.senders else { return unsendable(batch, "no senders configured", scope: .web) }
        let first = batch[0]
        let client: WebPushClient
        let policy = WebPushEndpointPolicy(hosts: first.webPushHosts, privateAddresses: first.webPushPrivateAddresses)
        switch await senders.webPush(
            app: app, keyFile: first.vapidKeyFile, subject: first.vapidSubject, policy: policy)
        {
        case .failure(let problem): return unsendable(batch, problem.description, scope: .web)
        case .success(let made): client = made
        }
        var results: [(Int64, DeliveryResult)] = []
        var messages: [(OutgoingDelivery, WebPushMessage)] = []
        for delivery in batch {
            do {
                let message = try builder.webPush(for: delivery, now: now)
                if delivery.dryRun {
                    _ = try WebPushEncryption.encrypt(message.payload, for: message.subscription)
                    results.append((delivery.deliveryID, DeliveryResult(state: .validated)))
                } else {
                    messages.append((delivery, message))
                }
            } catch let error as UnusableSubscription {
                results.append((delivery.deliveryID, DeliveryResult(state: .tokenInvalid, error: "\(error)")))
            } catch {
                results.append((delivery.deliveryID, DeliveryResult(state: .failed, error: "\(error)")))
            }
        }
        var problems: [ConfigurationScope: String] = [:]
        if !messages.isEmpty {
            let outcomes = await timed { await client.send(messages.map(\.1)) }
            results += self.results(
                messages.map(\.0), outcomes, dryRun: false, answeredAt: context.clock.now(), problems: &problems)
        }
        return (results, problems)
    }
}
