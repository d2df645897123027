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
