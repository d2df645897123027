import Testing

@testable import HeraldEmulator

/// Huawei Push Kit's stand-in is as strict as Huawei documents: what Herald sends passes, and
/// what Huawei refuses is refused with its result code.
@Suite struct HMSServiceTests {
    @Test func theStandInRefusesWhatPushKitRefuses() {
        func problem(_ message: [String: Any], _ extra: [String: Any] = [:]) -> String? {
            HMSService.problem(in: ["message": message].merging(extra) { $1 }, message: message, size: 100)?.code
        }
        let good: [String: Any] = [
            "data": "{}", "android": ["collapse_key": -1, "urgency": "HIGH", "ttl": "86400s"], "token": ["t"],
        ]
        #expect(problem(good) == nil)
        #expect(problem(good, ["dry_run": true]) == "80100001")
        #expect(problem(good.merging(["topic": "news"]) { $1 }) == "80100001")
        #expect(problem(good.merging(["token": [String]()]) { $1 }) == "80300010")
        #expect(problem(good.merging(["data": ["a": "b"]]) { $1 }) == "80100003")
        #expect(problem(good.merging(["android": ["collapse_key": 101]]) { $1 }) == "80100013")
        #expect(problem(good.merging(["android": ["urgency": "high"]]) { $1 }) == "80100001")
        #expect(problem(good.merging(["android": ["ttl": "1 day"]]) { $1 }) == "80100001")
        #expect(problem(good.merging(["android": ["ttl": "1296001s"]]) { $1 }) == "80100004")
        #expect(problem(good.merging(["android": ["priority": "high"]]) { $1 }) == "80100001")
    }
}

/// HarmonyOS Push Kit's stand-in refuses what Push Kit's v3 API documents as refused.
@Suite struct HarmonyServiceTests {
    @Test func theStandInRefusesWhatPushKitRefuses() {
        func problem(_ payload: [String: Any], pushType: Int = 0, _ extra: [String: Any] = [:]) -> String? {
            let request: [String: Any] = ["payload": payload, "target": ["token": ["t"]], "pushOptions": ["ttl": 60]]
            return HarmonyService.problem(in: request.merging(extra) { $1 }, pushType: pushType, size: 100)?.code
        }
        let notification: [String: Any] = [
            "category": "MARKETING", "title": "t", "body": "b", "clickAction": ["actionType": 0, "data": ["k": "v"]],
        ]
        #expect(problem(["notification": notification]) == nil)
        #expect(problem(["extraData": "{}"], pushType: 6) == nil)
        #expect(problem(["notification": notification], pushType: 6) == "80100003")
        #expect(problem(["extraData": ["a": "b"]], pushType: 6) == "80100003")
        #expect(problem(["notification": notification.merging(["category": "NEWS"]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification.filter { $0.key != "title" }]) == "80100003")
        #expect(problem(["notification": notification.filter { $0.key != "clickAction" }]) == "80100003")
        #expect(
            problem(["notification": notification.merging(["clickAction": ["actionType": 1]]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification.merging(["badge": ["addNum": 100]]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification.merging(["image": "http://x"]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification], ["pushOptions": ["ttl": 1_296_001]]) == "80100004")
        #expect(problem(["notification": notification], ["pushOptions": ["urgency": "HIGH"]]) == "80100001")
        #expect(problem(["notification": notification], ["target": ["token": [String]()]]) == "80300010")
        #expect(problem(["notification": notification], ["validate_only": true]) == "80100001")
    }
}
