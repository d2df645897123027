import Foundation
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Testing

/// The routing rule is data (`herald.route_targets`, `herald.routes`): a database migrated by a
/// newer Herald may name what this daemon cannot send. Such a delivery waits with its reason and
/// is never sent as something else; the rest of the claim goes out.
@Suite struct RoutingRuleTests {
    /// One delivery of each: to `pixel`, through FCM, and to `xiaomi`, whose token kind goes by
    /// route `mipush`, of provider `mipush`, which this binary does not have.
    func pixelAndAPhoneOfAnUnknownProvider() async throws -> WorkerFixture {
        let f = try await WorkerFixture.make()
        try await f.db.execute(
            """
            INSERT INTO herald.token_kinds VALUES ('mipush_token', '{android}', 'a Xiaomi Push token');
            INSERT INTO herald.providers (provider) VALUES ('mipush');
            INSERT INTO herald.routes VALUES ('mipush', 'mipush', 'Xiaomi phones', '{fcm}');
            INSERT INTO herald.route_targets VALUES ('android_data', 'mipush_token', 'mipush');
            """)
        try await f.register("pixel", "android")
        try await f.db.query(
            "SELECT herald.register_device('shop', 'xiaomi', 'android', 'token-xiaomi', 'alice', 'mipush_token')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        return f
    }

    func attemptsAndDue(_ f: WorkerFixture, _ device: String) async throws -> (Int, Date?) {
        let row = try await f.db.query(
            """
            SELECT d.attempts, d.run_at FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
            WHERE dev.device_id = $1
            """, [device])[0]
        return (try row.decode(0), try row.decode(1, as: Date?.self))
    }

    @Test func aRouteWhoseProviderThisDaemonLacksWaitsWithItsReasonUntilItExpires() async throws {
        let f = try await pixelAndAPhoneOfAnUnknownProvider()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let xiaomi = try await f.delivery(of: "xiaomi")
        #expect(xiaomi.state == "queued")
        #expect(xiaomi.error?.contains("does not know its provider mipush (route mipush)") == true, "\(xiaomi)")
        #expect(await f.emulator.received.allSatisfy { $0.target != "token-xiaomi" }, "never sent through FCM")
        let (attempts, due) = try await attemptsAndDue(f, "xiaomi")
        #expect(attempts == 0, "waiting is not an attempt")
        #expect(try #require(due) > Date().addingTimeInterval(30))

        // Its notification expires while it waits: it ends, with the reason.
        try await f.db.query("UPDATE herald.notifications SET expires_at = now() - interval '1 second'")
        try await f.db.query("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await f.dispatch()
        let expired = try await f.delivery(of: "xiaomi")
        #expect(expired.state == "expired" && expired.error?.contains("provider mipush") == true, "\(expired)")
    }

    /// A row routing a token kind to a provider that does not take it (FCM never takes a Xiaomi
    /// token): the delivery waits with the reason, never sent as a registration token, which FCM
    /// would refuse and so disable the device.
    @Test func aTargetItsProviderDoesNotTakeWaitsAndItsDeviceStaysEnabled() async throws {
        let f = try await WorkerFixture.make()
        try await f.db.execute(
            """
            INSERT INTO herald.token_kinds VALUES ('mipush_token', '{android}', 'a Xiaomi Push token');
            INSERT INTO herald.route_targets VALUES ('android_data', 'mipush_token', 'fcm');
            """)
        try await f.db.query(
            "SELECT herald.register_device('shop', 'xiaomi', 'android', 'token-xiaomi', 'alice', 'mipush_token')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        try await f.dispatch()
        let xiaomi = try await f.delivery(of: "xiaomi")
        #expect(xiaomi.state == "queued" && xiaomi.error?.contains("token kind mipush_token") == true, "\(xiaomi)")
        #expect(await f.emulator.received.isEmpty)
        #expect(try await f.db.query("SELECT 1 FROM herald.devices WHERE disabled_at IS NOT NULL").isEmpty)
    }

    /// The rule's own answer for a pair it has no row for: an Android notification to a device
    /// that registered again as an iPhone since ingest is cancelled with that reason.
    @Test func aDeviceThatRegisteredAgainAsAnotherPlatformIsNotSentTheOldPayload() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("phone", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        try await f.db.query(
            "SELECT herald.register_device('shop', 'phone', 'ios', $1, 'alice', 'apns_device_token')",
            [WorkerFixture.apnsToken("phone")])
        try await f.dispatch()
        let moved = try await f.delivery(of: "phone")
        #expect(moved.state == "cancelled" && moved.error?.contains("another platform") == true, "\(moved)")
        #expect(await f.emulator.received.isEmpty)
    }

    @Test func aPayloadKindThisDaemonDoesNotKnowIsNeverSentAsAnother() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        try await f.register("tablet", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        // A newer Herald's kind, routed like an Android message.
        try await f.db.execute(
            """
            ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
            INSERT INTO herald.route_targets VALUES ('widget', 'registration_token', 'fcm');
            UPDATE herald.deliveries d SET payload_kind = 'widget' FROM herald.devices dev
            WHERE dev.id = d.device_id AND dev.device_id = 'tablet';
            """)
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let tablet = try await f.delivery(of: "tablet")
        #expect(tablet.state == "queued" && tablet.error?.contains("payload kind widget") == true, "\(tablet)")
        #expect(await f.emulator.received.allSatisfy { $0.target != "token-tablet" })
    }
}
