import Foundation
import HeraldCrypto
import Testing

@testable import HeraldEmulator

/// vivo Push's stand-in is as strict as vivo's server API (doc 362) and its Java server SDK:
/// what Herald sends passes, and what vivo refuses is refused.
@Suite struct VivoServiceTests {
    static var good: [String: Any] {
        [
            "appId": 105_469_478, "regId": "15638535410301000000001", "notifyType": 4, "title": "t", "content": "c",
            "timeToLive": 86_400, "skipType": 1, "networkType": -1, "classification": 1, "category": "IM",
            "clientCustomMap": ["k": "v"], "requestId": "herald-1", "pushMode": 0, "notifyId": 7,
        ]
    }

    @Test func theStandInRefusesWhatVivoRefuses() {
        func code(_ changes: [String: Any] = [:], removing: [String] = []) -> Int? {
            var object = Self.good.merging(changes) { $1 }
            for key in removing { object[key] = nil }
            return VivoService.problem(in: object)?.code
        }
        #expect(code() == nil)
        #expect(code(["priority": 1]) != nil, "only vivo's members")
        #expect(code(removing: ["regId"]) != nil)
        #expect(code(["notifyType": 5]) != nil, "notifyType 1 to 4")
        #expect(code(["title": String(repeating: "a", count: 41)]) != nil, "a title of 40 at most")
        #expect(code(["title": String(repeating: "中", count: 21)]) != nil, "a Chinese character counts two")
        #expect(code(["title": String(repeating: "中", count: 20)]) == nil)
        #expect(code(["content": String(repeating: "a", count: 101)]) != nil, "a content of 100 at most")
        #expect(code(["content": ""]) != nil, "a content is required")
        #expect(code(["timeToLive": 59]) != nil && code(["timeToLive": 604_801]) != nil, "the SDK's 60 s to 7 days")
        #expect(code(["skipType": 3]) != nil, "skipType 3 is gone since SDK 480")
        #expect(code(["skipType": 2, "skipContent": "shop://x"]) != nil, "skipType 2 is a web page")
        #expect(code(["skipType": 2, "skipContent": "https://a.example"]) == nil)
        #expect(code(["skipType": 4]) != nil, "skipType 4 needs its intent URI")
        #expect(code(["classification": 0]) != nil, "IM is a system category")
        #expect(code(["classification": 0, "category": "MARKETING"]) == nil)
        #expect(code(removing: ["category"]) != nil, "a system message names its category")
        #expect(code(["clientCustomMap": Dictionary(uniqueKeysWithValues: (1...11).map { ("k\($0)", "v") })]) != nil)
        #expect(code(["clientCustomMap": ["k": String(repeating: "v", count: 1024)]]) != nil, "1024 characters")
        #expect(code(["requestId": String(repeating: "r", count: 65)]) != nil, "a requestId of 64 at most")
        #expect(code(["pushMode": 2]) != nil)
    }

    @Test func sendsNeedASignedAuthTokenOfTheAppAndARequestIDIsTakenOnce() async throws {
        let service = VivoService()
        await service.registerApp(appID: "105469478", key: "key", secret: "s3cret")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        func auth(secret: String, timestamp: Int64 = now) async -> [String: Any] {
            let sign = Digest.hex(Digest.md5(Array("105469478key\(timestamp)\(secret)".utf8)))
            let body = try? JSONSerialization.data(withJSONObject: [
                "appId": 105_469_478, "appKey": "key", "timestamp": timestamp, "sign": sign,
            ])
            let answer = await service.auth(body: body ?? Data())
            return (try? JSONSerialization.jsonObject(with: Data(answer.1.utf8)) as? [String: Any]) ?? [:]
        }
        #expect(await auth(secret: "no")["result"] as? Int != 0, "a wrong secret's sign")
        #expect(await auth(secret: "s3cret", timestamp: now / 1000)["result"] as? Int != 0, "milliseconds")
        let token = try #require(await auth(secret: "s3cret")["authToken"] as? String)
        let body = try JSONSerialization.data(withJSONObject: Self.good)
        let unsigned = await service.send(headers: [:], body: body)
        #expect(unsigned.json.contains(#""result":10000"#))
        let sent = await service.send(headers: ["authtoken": token], body: body)
        #expect(sent.json.contains(#""result":0"#))
        let again = await service.send(headers: ["authtoken": token], body: body)
        #expect(again.json == sent.json, "the same requestId: the same task, not sent again")
        #expect(await service.received.count == 1)
        var other = Self.good
        other["appId"] = 1
        let otherApp = await service.send(
            headers: ["authtoken": token], body: try JSONSerialization.data(withJSONObject: other))
        #expect(otherApp.json.contains(#""result":10094"#))
    }
}
