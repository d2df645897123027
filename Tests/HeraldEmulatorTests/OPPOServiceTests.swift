import Foundation
import HeraldCrypto
import Testing

@testable import HeraldEmulator

/// OPPO Push's stand-in is as strict as OPPO's pages and its server SDK: what Herald sends
/// passes, and what OPPO refuses is refused with its code.
@Suite struct OPPOServiceTests {
    static let regID = "CN_078ad8b8a137cadb14ae5b70cf846312"

    @Test func theStandInRefusesWhatOPPORefuses() {
        let notification: [String: Any] = [
            "title": "t", "content": "c", "click_action_type": 0, "action_parameters": "{}", "channel_id": "orders",
            "category": "ORDER", "notify_level": 2, "notify_id": 7, "off_line": true, "off_line_ttl": 3600,
        ]
        let good: [String: Any] = ["target_type": 2, "target_value": Self.regID, "notification": notification]
        let channels = ["orders": true, "news": false]
        func code(_ changes: [String: Any] = [:], notification changed: [String: Any] = [:]) -> Int? {
            var object = good.merging(changes) { $1 }
            if !changed.isEmpty { object["notification"] = notification.merging(changed) { $1 } }
            return OPPOService.problem(in: object, channels: channels)?.code
        }
        #expect(code() == nil)
        #expect(code(["priority": "high"]) == 41, "only OPPO's members")
        #expect(code(["target_type": 5]) == 41, "a registration id, not an alias")
        #expect(code(["target_value": "not-a-registration-id"]) == 10000, "the SDK's shape of one")
        #expect(code(["target_value": "078ad8b8a137cadb14ae5b70cf846312"]) == nil, "the prefix is optional")
        #expect(code(notification: ["title": ""]) == 40, "a title and a content")
        #expect(code(notification: ["title": String(repeating: "a", count: 51)]) == 41, "50 characters at most")
        #expect(code(notification: ["content": String(repeating: "a", count: 201)]) == 41, "200 at most")
        #expect(code(notification: ["click_action_type": 2]) == 41, "a web page needs its URL")
        #expect(code(notification: ["click_action_type": 2, "click_action_url": "https://a.example"]) == nil)
        #expect(code(notification: ["click_action_type": 4]) == 41, "an activity needs its name")
        #expect(code(notification: ["click_action_type": 3]) == 41)
        #expect(code(notification: ["action_parameters": "[1]"]) == 41, "a JSON object in a string")
        #expect(code(notification: ["off_line_ttl": 864_001]) == 41, "10 days at most")
        #expect(code(notification: ["off_line_ttl": 3599]) == 41, "an hour at least")
        let long = "https://a.example/" + String(repeating: "a", count: 500)
        #expect(code(notification: ["click_action_type": 2, "click_action_url": long]) == 41, "500 characters")
        #expect(code(notification: ["notify_level": 3]) == 41, "1, 2 or 16")
        #expect(code(notification: ["notify_level": 16]) == nil)
        #expect(code(notification: ["category": "PROMOTION"]) == 41, "OPPO's categories only")
        #expect(code(notification: ["channel_id": "unknown"]) == 41, "a channel the app registered")
        #expect(code(notification: ["category": "MARKETING"]) == 41, "no marketing in the private channel")
        #expect(code(notification: ["category": "MARKETING", "channel_id": "news", "notify_level": 1]) == nil)
        #expect(code(notification: ["importance": "LOW"]) == 41, "OPPO has no importance")
    }

    @Test func authNeedsTheSignOfTheAppKeyATimeAndTheMasterSecret() async {
        let service = OPPOService()
        await service.registerApp(appKey: "key", masterSecret: "s3cret", channels: [:], publicDailyLimit: 1)
        let now = Date()
        let timestamp = "\(Int64(now.timeIntervalSince1970 * 1000))"
        func auth(_ fields: String) async -> String { await service.authenticate(form: Data(fields.utf8), now: now) }
        let sign = Digest.hex(Digest.sha256(Array("key\(timestamp)s3cret".utf8)))
        #expect(await auth("sign=\(sign)&timestamp=\(timestamp)").contains(#""code":15"#))
        #expect(await auth("app_key=other&sign=\(sign)&timestamp=\(timestamp)").contains(#""code":14"#))
        #expect(await auth("app_key=key&timestamp=\(timestamp)").contains(#""code":17"#))
        #expect(await auth("app_key=key&sign=\(sign)").contains(#""code":18"#))
        let seconds = "\(Int64(now.timeIntervalSince1970))"
        #expect(await auth("app_key=key&sign=\(sign)&timestamp=\(seconds)").contains(#""code":19"#), "milliseconds")
        #expect(await auth("app_key=key&sign=\(sign.uppercased())&timestamp=\(timestamp)").contains(#""code":16"#))
        let issued = await auth("app_key=key&sign=\(sign)&timestamp=\(timestamp)")
        let data = (try? JSONSerialization.jsonObject(with: Data(issued.utf8)) as? [String: Any])?["data"]
        let token = (data as? [String: Any])?["auth_token"] as? String ?? ""
        #expect(!token.isEmpty)

        let message = #"{"target_type":2,"target_value":"\#(Self.regID)","notification":{"title":"t","content":"c"}}"#
        let form =
            "auth_token=\(token)&message=\(message.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        let headers = ["content-type": "application/x-www-form-urlencoded"]
        let sent = await service.send(headers: headers, body: Data(form.utf8))
        #expect(sent.json.contains(#""code":0"#), "\(sent.json)")
        let over = await service.send(headers: headers, body: Data(form.utf8))
        #expect(over.json.contains(#""code":33"#), "the public channel's daily limit")
        let noToken = await service.send(headers: headers, body: Data("message=\(message)".utf8))
        #expect(noToken.json.contains(#""code":29"#))
        await service.expireAuthTokens()
        #expect(await service.send(headers: headers, body: Data(form.utf8)).json.contains(#""code":11"#))
        #expect(await service.received.count == 1)
    }
}
