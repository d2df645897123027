import Foundation
import HeraldCore
import Testing

@testable import HeraldWorkers

/// The rules of a delivery's life, without I/O: each step from a delivery, an event and a time.
@Suite struct DeliveryLifeTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    /// Full jitter at its ceiling, so delays are the backoff's ceilings.
    let backoff = Backoff(random: { 0.999_999 })

    func delivery(attempts: Int = 1, _ change: (inout OutgoingDelivery) -> Void = { _ in }) -> OutgoingDelivery {
        var delivery = OutgoingDelivery(
            deliveryID: 1, appID: "shop", payloadKind: .androidData, attempts: attempts,
            notification: .init(
                id: 2, priority: "high", expiresAt: now.addingTimeInterval(3600), silent: false, dryRun: false),
            device: .init(rowID: 3, reportReference: "reference"), target: .registrationToken("token"), route: .fcm)
        change(&delivery)
        return delivery
    }

    func next(_ delivery: OutgoingDelivery, _ event: DeliveryLife.Event) -> DeliveryResult? {
        DeliveryLife.next(delivery, after: event, now: now, backoff: backoff)
    }

    @Test func aClaimedDeliveryIsSentUnlessItCannotOrNeedNotBe() throws {
        #expect(next(delivery(), .claimed) == nil)
        #expect(next(delivery { $0.notification.expiresAt = now }, .claimed)?.state == .expired)
        let disabled = try #require(next(delivery { $0.device?.disabledReason = "token_invalid" }, .claimed))
        #expect(disabled.state == .cancelled && disabled.error?.contains("token_invalid") == true)
        #expect(next(delivery { $0.target = nil }, .claimed)?.error == "the device has no push token")
        // An Android notification for a device that registered again as an iPhone since ingest.
        let moved = try #require(
            next(
                delivery {
                    $0.target = .apnsDeviceToken("abc")
                    $0.route = nil
                }, .claimed))
        #expect(moved.state == .cancelled && moved.error?.contains("another platform") == true, "\(moved)")
        // Claimed once more after its last lease ran out: dead, naming who held it.
        let abandoned = try #require(
            next(delivery(attempts: DeliveryLife.maxAttempts + 1) { $0.abandonedBy = "host-a" }, .claimed))
        #expect(abandoned.state == .failed && abandoned.dead && abandoned.error?.contains("host-a") == true)
    }

    @Test func aFailedAttemptBacksOffUntilTheLastOneThenIsDead() throws {
        let unavailable = PushOutcome.retry(after: nil, reason: "503 UNAVAILABLE")
        let third = try #require(next(delivery(attempts: 3), .sent(unavailable, dryRun: false, at: now)))
        #expect(third.state == .queued && third.error == "503 UNAVAILABLE" && !third.dead)
        guard case .retry(let at) = third.requeue else { Issue.record("\(third)"); return }
        #expect(abs(at.timeIntervalSince(now) - 4) < 0.01, "the third attempt's ceiling is 4 s")
        // A server's Retry-After is a floor.
        let throttled = try #require(
            next(delivery(), .sent(.retry(after: .seconds(60), reason: "429"), dryRun: false, at: now)))
        #expect(throttled.requeue?.dueAt == now.addingTimeInterval(60))
        let last = try #require(
            next(delivery(attempts: DeliveryLife.maxAttempts), .sent(unavailable, dryRun: false, at: now)))
        #expect(last.state == .failed && last.dead && last.requeue == nil)
        #expect(last.error == "gave up after 25 attempts: 503 UNAVAILABLE")
    }

    /// The project over its quota is no attempt of the delivery's, even its last: it waits with
    /// the project, however many attempts it has spent.
    @Test func theProjectOverItsQuotaIsNoAttempt() throws {
        let over = PushOutcome.overQuota(after: .seconds(30), reason: "429 RESOURCE_EXHAUSTED: Quota exceeded")
        let result = try #require(
            next(delivery(attempts: DeliveryLife.maxAttempts), .sent(over, dryRun: false, at: now)))
        #expect(result.state == .queued && !result.dead)
        guard case .postponed(let until) = result.requeue else { Issue.record("\(result)"); return }
        #expect(until == now.addingTimeInterval(30))
        #expect(
            result.error == "waiting: the provider holds the sender back: 429 RESOURCE_EXHAUSTED: Quota exceeded")
    }

    @Test func answersEndTheDelivery() throws {
        let sent = try #require(next(delivery(), .sent(.sent(messageName: "m/1"), dryRun: false, at: now)))
        #expect(sent.state == .sent && sent.messageName == "m/1" && sent.answeredAt == now)
        #expect(next(delivery(), .sent(.sent(messageName: "m/1"), dryRun: true, at: now))?.state == .validated)
        #expect(next(delivery(), .checked(at: now))?.state == .validated)
        let dead = try #require(
            next(delivery(), .sent(.tokenInvalid(reason: "410", since: now), dryRun: false, at: now)))
        #expect(dead.state == .tokenInvalid && dead.invalidSince == now)
        #expect(next(delivery(), .sent(.permanentFailure(reason: "400"), dryRun: false, at: now))?.state == .failed)
        // A refused configuration is an attempt, retried no sooner than the next probe.
        let refused = try #require(
            next(delivery(), .sent(.configurationError(reason: "401", scope: .fcm), dryRun: false, at: now)))
        #expect(refused.error == "configuration: 401")
        #expect(refused.requeue.map { $0.dueAt >= now.addingTimeInterval(60) } == true)
    }

    @Test func waitingIsNotAnAttempt() throws {
        // A failing configuration: all wait until a minute after the last failure...
        let recent = DeliveryLife.Event.configurationFailing(
            failedAt: now.addingTimeInterval(-20), probe: true, route: "FCM")
        let waiting = try #require(next(delivery(), recent))
        guard case .postponed(let until) = waiting.requeue else { Issue.record("\(waiting)"); return }
        #expect(until == now.addingTimeInterval(40))
        #expect(waiting.error?.contains("herald.app_problems") == true)
        // ...then the first goes out as a probe and the rest wait for its answer.
        let old = now.addingTimeInterval(-61)
        #expect(next(delivery(), .configurationFailing(failedAt: old, probe: true, route: "FCM")) == nil)
        let behind = try #require(next(delivery(), .configurationFailing(failedAt: old, probe: false, route: "FCM")))
        #expect(behind.requeue?.dueAt == now.addingTimeInterval(5))
        // A full window: postponed, and nothing added to its error history.
        let crowded = try #require(next(delivery(), .crowdedOut(wait: .seconds(3))))
        guard case .postponed(let due) = crowded.requeue else { Issue.record("\(crowded)"); return }
        #expect(due == now.addingTimeInterval(3) && crowded.error == nil && crowded.state == .queued)
    }
}
