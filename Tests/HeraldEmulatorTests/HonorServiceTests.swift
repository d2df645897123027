import Foundation
import Testing

@testable import HeraldEmulator

/// Honor Push's stand-in is as strict as Honor's field reference: what Herald sends passes, and
/// what Honor refuses is refused with its code.
@Suite struct HonorServiceTests {
    @Test func theStandInRefusesWhatHonorRefuses() {
        let notification: [String: Any] = [
            "title": "t", "body": "b", "clickAction": ["type": 3], "importance": "LOW", "notifyId": 7,
        ]
        let good: [String: Any] = [
            "data": "{}", "android": ["ttl": "86400s", "targetUserType": 0, "notification": notification],
            "token": ["t"],
        ]
        func code(_ changes: [String: Any] = [:], notification changed: [String: Any]? = nil) -> Int? {
            var object = good.merging(changes) { $1 }
            if let changed {
                object["android"] = ["notification": notification.merging(changed) { $1 }]
            }
            return HonorService.problem(in: object, size: 100)?.code
        }
        #expect(code() == nil)
        #expect(code(["priority": "high"]) == 80_100_001, "only Honor's members")
        #expect(code(["data": ["a": "b"]]) == 80_100_003, "data is a string")
        #expect(code(["token": [String]()]) == 80_300_010)
        #expect(code(["android": ["ttl": "1296001s"]]) == 80_100_004, "15 days at most")
        #expect(code(["android": ["ttl": "1 day"]]) == 80_100_001)
        #expect(code(["android": ["targetUserType": 2]]) == 80_100_001)
        #expect(code(notification: ["title": ""]) == 80_100_001, "a notification has a title and a body")
        #expect(code(notification: ["clickAction": ["type": 1]]) == 80_100_001, "an intent or action for type 1")
        #expect(code(notification: ["clickAction": ["type": 2, "url": "http://a.example"]]) == 80_100_001, "https")
        #expect(code(notification: ["clickAction": ["type": 2, "url": "https://a.example"]]) == nil)
        #expect(code(notification: ["importance": "HIGH"]) == 80_100_001)
        #expect(code(notification: ["category": "IM"]) == 80_100_001, "Honor has no category")
        #expect(HonorService.problem(in: good, size: 4097)?.code == 80_300_008)
    }

    @Test func sendsNeedTheAppsTokenAndAMillisecondTimestamp() async {
        let service = HonorService()
        await service.registerApp(appID: "104405925", clientID: "client", secret: "s3cret")
        let refused = await service.issueToken(
            form: Data("grant_type=client_credentials&client_id=client&client_secret=no".utf8))
        #expect(refused.0 == 401 && refused.1.contains("unauthorized_client"))
        let issued = await service.issueToken(
            form: Data("grant_type=client_credentials&client_id=client&client_secret=s3cret".utf8))
        let token = try? #require(
            (try? JSONSerialization.jsonObject(with: Data(issued.1.utf8)) as? [String: Any])?["access_token"] as? String
        )
        let body = Data(#"{"data":"{}","token":["t"]}"#.utf8)
        let now = "\(Int64(Date().timeIntervalSince1970 * 1000))"
        let sent = await service.send(
            appID: "104405925", headers: ["authorization": "Bearer \(token ?? "")", "timestamp": now], body: body)
        #expect(sent.status == 200 && sent.json.contains(#""code":200"#))
        let otherApp = await service.send(
            appID: "1", headers: ["authorization": "Bearer \(token ?? "")", "timestamp": now], body: body)
        #expect(otherApp.status == 401)
        let seconds = await service.send(
            appID: "104405925", headers: ["authorization": "Bearer \(token ?? "")", "timestamp": "1733300000"],
            body: body)
        #expect(seconds.status == 400)
        #expect(await service.received.count == 1)
    }
}
