import Foundation
import HeraldCrypto
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// The platforms' newer options for a notification: iOS's interruption level, relevance score,
/// Focus filter and target content id (straight to APNs and through FCM, checked by the
/// emulator as Apple documents them), Android's direct boot and a topic's proxy setting, and
/// Declarative Web Push for Safari.
@Suite struct PlatformFieldsTests {
    @Test func iOSAlertsCarryTheNewerFieldsStraightToAPNsAndThroughFCM() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let direct = try await f.registerIPhone("iphone")
        _ = try await f.db.query(
            "SELECT herald.register_device('shop', 'iphone-fcm', 'ios', 'token-iphone-fcm', 'alice', 'registration_token')"
        )
        _ = try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Your table is ready', sound => 'bell',
                               ios_interruption_level => 'time-sensitive', ios_relevance_score => 0.75,
                               ios_filter_criteria => 'dining', ios_target_content_id => 'booking-7')
            """)
        try await f.ingest()
        try await f.dispatch()

        let push = try #require(await f.emulator.apnsReceived.first { $0.deviceToken == direct })
        let throughFCM = try #require(await f.message(to: "token-iphone-fcm"))
        let fcmAPS = try #require(
            ((throughFCM["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])
        for aps in [push.aps, fcmAPS] {
            #expect(aps["interruption-level"] as? String == "time-sensitive")
            #expect(aps["relevance-score"] as? Double == 0.75)
            #expect(aps["filter-criteria"] as? String == "dining")
            #expect(aps["target-content-id"] as? String == "booking-7")
            #expect(aps["sound"] as? String == "bell")
        }
        #expect(try await f.delivery(of: "iphone").state == "sent")
        #expect(try await f.delivery(of: "iphone-fcm").state == "sent")
    }

    @Test func aCriticalAlertsSoundIsTheDictionaryThatPlaysWhenMuted() async throws {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Smoke detected', ios_interruption_level => 'critical')"
        )
        try await f.ingest()
        try await f.dispatch()
        let push = try #require(await f.emulator.apnsReceived.first)
        #expect(push.aps["interruption-level"] as? String == "critical")
        let sound = try #require(push.aps["sound"] as? [String: Any])
        #expect(sound["critical"] as? Int == 1)
        #expect(sound["name"] as? String == "default")
    }

    @Test func androidGetsDirectBootAndATopicItsProxySetting() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Alarm', android_direct_boot_ok => true)")
        _ = try await f.db.query(
            """
            SELECT herald.send('shop', topic => 'news', title => 'Headline', android_proxy => 'deny',
                               android_direct_boot_ok => false)
            """)
        try await f.ingest()
        try await f.dispatch()
        let pixel = try #require(await f.message(to: "token-pixel"))
        let android = try #require(pixel["android"] as? [String: Any])
        #expect(android["direct_boot_ok"] as? Bool == true)
        #expect(android["notification"] == nil, "a data message has no notification to proxy")
        let topic = try #require(await f.emulator.received.first { $0.target == "news" }?.message)
        let topicAndroid = try #require(topic["android"] as? [String: Any])
        #expect((topicAndroid["notification"] as? [String: Any])?["proxy"] as? String == "DENY")
        #expect(topicAndroid["direct_boot_ok"] as? Bool == false)
        let states = try await f.db.query("SELECT DISTINCT state FROM herald.deliveries").map {
            try $0.decode(0, as: String.self)
        }
        #expect(states == ["sent"])
    }

    @Test(arguments: [
        (
            "ios_interruption_level => 'urgent'",
            "ios_interruption_level must be passive, active, time-sensitive or critical"
        ),
        ("ios_relevance_score => 1.5", "ios_relevance_score must be a number from 0 to 1, not 1.5"),
        ("ios_relevance_score => 'NaN'", "ios_relevance_score must be a number from 0 to 1, not NaN"),
        ("ios_relevance_score => '-Infinity'", "ios_relevance_score must be a number from 0 to 1"),
        (#"ios_filter_criteria => E'work\r\napns-topic: x'"#, "ios_filter_criteria contains a control character"),
        (#"ios_target_content_id => E'\x07'"#, "ios_target_content_id contains a control character"),
        ("ios_target_content_id => repeat('t', 5000)", "over the 4096-byte limit"),
        ("android_proxy => 'sometimes'", "android_proxy must be allow, deny or if_priority_lowered"),
        ("android_proxy => 'allow'", "android_proxy applies to FCM notification messages"),
    ])
    func ingestRefusesWhatThePlatformsWouldNot(arguments: String, reason: String) async throws {
        let f = try await WorkerFixture.make()
        try await f.register("pixel", "android")
        let id = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'x', \(arguments))")[0].decode(0, as: Int64.self)
        try await f.ingest()
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [id])[0]
        #expect(try row.decode(0, as: String.self) == "rejected")
        let said = try row.decode(1, as: String.self)
        #expect(said.contains(reason), "\(said)")
        #expect(try await f.db.query("SELECT 1 FROM herald.deliveries").isEmpty)
    }

    /// Safari (Apple's push service) gets the declarative form beside the classic document, so
    /// that it shows the notification without a service worker; other push services, and a
    /// notification without a title or a web link to open, get the classic document alone.
    @Test func safariGetsDeclarativeWebPushAndOtherBrowsersTheClassicDocument() throws {
        let builder = PayloadBuilder(reportBaseURL: "https://push.example.com")
        let key = try CryptoKey.generateP256().publicPoint()
        func document(
            endpoint: String, deepLink: String? = "https://shop.example/o/42", title: String? = "Shipped",
            body: String = "Parcel 42", silent: Bool = false
        ) throws -> [String: Any] {
            let delivery = OutgoingDelivery(
                deliveryID: 1, appID: "shop", payloadKind: .web, attempts: 1,
                notification: .init(
                    id: 2, title: title, body: body, data: [("order", "42")], badge: 4, deepLink: deepLink,
                    priority: "high", expiresAt: Date().addingTimeInterval(3600), collapseKey: "order-42",
                    silent: silent, dryRun: false),
                device: .init(rowID: 3, reportReference: "AAAAAAAAAAEAAAAAAAAAA9yE3Q1lI4d1Zq0RQXcB5eA"),
                target: .subscription(
                    kind: "web_subscription", endpoint: endpoint, p256dh: key, auth: Array(repeating: 1, count: 16)),
                route: nil)
            let payload = try builder.webPushMessage(for: delivery, now: Date()).payload
            return try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        }

        let safari = try document(endpoint: "https://web.push.apple.com/QGuQyavXutnMH")
        #expect(safari["web_push"] as? Int == 8030)
        let shown = try #require(safari["notification"] as? [String: Any])
        #expect(shown["title"] as? String == "Shipped")
        #expect(shown["body"] as? String == "Parcel 42")
        #expect(shown["navigate"] as? String == "https://shop.example/o/42")
        #expect(shown["tag"] as? String == "order-42")
        #expect(shown["app_badge"] as? Int == 4)
        #expect(shown["mutable"] as? Bool == true, "a service worker still sees it, to report it")
        let data = try #require(shown["data"] as? [String: String])
        #expect(data["order"] == "42")
        #expect(data["herald_report_url"]?.hasPrefix("https://push.example.com/v1/reports/") == true)
        #expect(safari["title"] as? String == "Shipped", "older Safari's service worker reads the classic members")
        #expect(safari["herald_report"] as? String == data["herald_report"])

        #expect(try document(endpoint: "https://fcm.googleapis.com/fcm/send/abc")["web_push"] == nil)
        #expect(try document(endpoint: "https://evil.example/web.push.apple.com/x")["web_push"] == nil)
        #expect(try document(endpoint: "https://web.push.apple.com/x", deepLink: "shop://o/42")["web_push"] == nil)
        #expect(try document(endpoint: "https://web.push.apple.com/x", deepLink: nil)["web_push"] == nil)
        #expect(try document(endpoint: "https://web.push.apple.com/x", title: nil)["web_push"] == nil)
        #expect(try document(endpoint: "https://web.push.apple.com/x", silent: true)["web_push"] == nil)
        // Both forms would not fit in Web Push's 3993 bytes; the classic one alone does.
        let long = String(repeating: "b", count: 2000)
        let classic = try document(endpoint: "https://web.push.apple.com/x", body: long)
        #expect(classic["web_push"] == nil)
        #expect(classic["body"] as? String == long)
    }
}
