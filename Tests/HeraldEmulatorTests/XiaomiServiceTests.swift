import Foundation
import Testing

@testable import HeraldEmulator

/// Xiaomi Mi Push's stand-in is as strict as Xiaomi documents (``XiaomiService``): what Herald
/// sends passes, and what Mi Push refuses is refused with its error code.
@Suite struct XiaomiServiceTests {
    static let good = [
        "registration_id": "d//igwEhgBGCI2TG6lWqlK", "restricted_package_name": "com.example.shop",
        "pass_through": "0", "title": "Shipped", "description": "Parcel 42", "payload": "{}",
        "extra.notify_effect": "1", "notify_id": "42", "time_to_live": "86400000",
    ]

    func code(_ changes: [String: String?]) -> Int? {
        var fields = Self.good
        for (name, value) in changes { fields[name] = value }
        guard case .error(let code, _) = XiaomiService.problem(in: fields, channels: ["orders": true]) else {
            return nil
        }
        return code
    }

    @Test func theStandInRefusesWhatMiPushRefuses() {
        #expect(code([:]) == nil)
        #expect(code(["priority": "high"]) == 10017, "only Mi Push's fields")
        #expect(code(["registration_id": ""]) == 10016)
        #expect(code(["pass_through": "2"]) == 10017)
        #expect(code(["title": "  "]) == 65011, "a notification's title is not blank")
        #expect(code(["description": nil]) == 65011)
        #expect(code(["title": String(repeating: "字", count: 50)]) == 10017, "under 50 characters")
        #expect(code(["title": String(repeating: "字", count: 49)]) == nil)
        #expect(code(["description": String(repeating: "a", count: 128)]) == 10017, "under 128 characters")
        #expect(code(["extra.notify_effect": nil]) == 10017, "required since 2024-09-30")
        #expect(code(["extra.notify_effect": "2"]) == 10017, "an intent needs its URI")
        #expect(code(["extra.notify_effect": "3", "extra.web_uri": "https://shop.example"]) == nil)
        #expect(code(["pass_through": "1", "title": nil, "description": nil, "extra.notify_effect": nil]) == nil)
        #expect(code(["notify_id": "2147483648"]) == 10017)
        #expect(code(["time_to_live": "1 day"]) == 10017)
        #expect(code(["extra.channel_id": "news"]) == 27001, "a channel the app did not register")
        #expect(code(["extra.channel_id": "orders"]) == nil)
        let custom = Dictionary(uniqueKeysWithValues: (0..<11).map { ("extra.k\($0)", Optional("v")) })
        #expect(code(custom) == 65014)
        #expect(code(["payload": String(repeating: "x", count: 4097)]) == 65009)
    }

    @Test func theSecretAndThePackageAreTheApps() async {
        let service = XiaomiService()
        await service.registerApp(packageName: "com.example.shop", secret: "s3cret", channels: [:])
        func body(_ fields: [String: String]) -> Data {
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            return Data(
                fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
                    .joined(separator: "&").utf8)
        }
        let form = "application/x-www-form-urlencoded;charset=UTF-8"
        func code(_ authorization: String?, _ contentType: String = form, _ body: Data = body(Self.good)) async -> Int {
            switch await service.send(authorization: authorization, contentType: contentType, body: body).answer {
            case .success: 0
            case .error(let code, _): code
            }
        }
        #expect(await code("key=s3cret") == 0)
        #expect(await code("Key=s3cret") == 21301, "\"key\" in lower case")
        #expect(await code("key=other") == 21301)
        #expect(await code(nil) == 21301)
        #expect(await code("key=s3cret", "application/json") == 10017)
        var otherPackage = Self.good
        otherPackage["restricted_package_name"] = "com.example.other"
        #expect(await code("key=s3cret", form, body(otherPackage)) == 22022)
        #expect(await service.received.count == 1)
    }
}
