import Foundation
import HeraldCrypto
import HeraldFCM
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// `docs/app-integration.md` tells app developers which keys each payload carries; the
/// encoder must emit exactly those.
@Suite struct AppIntegrationGuideTests {
    /// The guide's key table: for each platform column, the keys marked "yes".
    func documentedKeys() throws -> [String: Set<String>] {
        let guide = try String(
            contentsOf: packageRoot.appendingPathComponent("docs/app-integration.md"), encoding: .utf8)
        let columns = ["android", "ios_alert", "ios_wakeup", "browser"]
        var keys: [String: Set<String>] = [:]
        for line in guide.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let key = cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            for (column, cell) in zip(columns, cells[1...4]) where cell == "yes" {
                keys[column, default: []].insert(key)
            }
        }
        return keys
    }

    /// The keys Herald puts beside `aps` (iOS), in `data` (Android) or in a browser's document,
    /// for a delivery using every option.
    func emittedKeys() throws -> [String: Set<String>] {
        let builder = PayloadBuilder(reportBaseURL: "https://push.example.com")
        let browserKey = try CryptoKey.generateP256().publicPoint()
        func delivery(_ kind: OutgoingDelivery.PayloadKind, silent: Bool = false) -> OutgoingDelivery {
            OutgoingDelivery(
                deliveryID: 1, appID: "shop", payloadKind: kind, attempts: 1,
                notification: .init(
                    id: 2, title: "T", body: "B", data: [], imageURL: "https://img/x.png", sound: "ding", badge: 1,
                    deepLink: "shop://x", priority: "high", expiresAt: Date().addingTimeInterval(3600),
                    silent: silent, dryRun: false, apple: .init(category: "C", threadID: "t"),
                    android: .init(channelID: "orders")),
                device: .init(rowID: 3, reportReference: "AAAAAAAAAAEAAAAAAAAAA9yE3Q1lI4d1Zq0RQXcB5eA"),
                target: kind == .web
                    ? .subscription(
                        kind: "web_subscription", endpoint: "https://push.example.net/push/1", p256dh: browserKey,
                        auth: Array(repeating: 1, count: 16)) : .registrationToken("token"),
                route: nil)
        }
        func document(silent: Bool) throws -> Set<String> {
            let payload = try builder.webPushMessage(for: delivery(.web, silent: silent), now: Date()).payload
            return Set((try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] ?? [:]).keys)
        }
        func custom(_ message: FCMMessage) -> Set<String> {
            guard case .object(let fields)? = message.apns?.payload else { return [] }
            return Set(fields.map(\.0).filter { $0 != "aps" })
        }
        let now = Date()
        let android = builder.fcmMessage(for: delivery(.androidData), now: now).data.map(\.0)
        let silentAndroid = builder.fcmMessage(for: delivery(.androidData, silent: true), now: now).data.map(\.0)
        let catchUp = builder.fcmMessage(for: delivery(.androidWakeup, silent: true), now: now).data.map(\.0)
        return [
            "android": Set(android + silentAndroid + catchUp),
            "ios_alert": custom(builder.fcmMessage(for: delivery(.iosAlert), now: now)),
            "ios_wakeup": custom(builder.fcmMessage(for: delivery(.iosWakeup), now: now)),
            "browser": try document(silent: false).union(try document(silent: true)),
        ]
    }

    @Test func theGuideListsExactlyTheKeysTheEncoderEmits() throws {
        let documented = try documentedKeys()
        let emitted = try emittedKeys()
        #expect(documented.keys.sorted() == ["android", "browser", "ios_alert", "ios_wakeup"])
        for platform in emitted.keys.sorted() {
            #expect(documented[platform] == emitted[platform], "\(platform)")
        }
        #expect(emitted["ios_wakeup"]?.contains(PayloadKeys.report) == true)
        #expect(emitted["ios_alert"]?.contains(PayloadKeys.reportURL) == true)
    }
}
