import Testing

@testable import HeraldEmulator

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
        #expect(problem(["notification": notification.merging(["image": "https://x/y.png"]) { $1 }]) == "80100022")
        #expect(problem(["notification": notification.merging(["title": ""]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification.merging(["notifyId": -1]) { $1 }]) == "80100003")
        #expect(problem(["notification": notification], ["pushOptions": ["ttl": 1_296_001]]) == "80100004")
        #expect(problem(["notification": notification], ["pushOptions": ["urgency": "HIGH"]]) == "80100001")
        #expect(problem(["notification": notification], ["target": ["token": [String]()]]) == "80300010")
        #expect(problem(["notification": notification], ["validate_only": true]) == "80100001")
    }
}
