import Foundation
import HeraldCore

/// Mi Push's receipts: a message that names a callback (`extra.callback`, its type a sum of the
/// receipts wanted) has Mi Push post what became of it there, a form whose `data` is JSON keyed
/// by Mi Push's message id: `{"<msgId>": {"param", "type", "targets", "barStatus", "timestamp",
/// "errorCode", …}}`, several messages a post. Mi Push signs nothing, so each message's
/// `extra.callback.param` is its delivery's report reference, which names the delivery and its
/// device under Herald's HMAC: a receipt proves itself, and one whose reference does not open
/// names no delivery.
struct MiPushReceipts: ReceiptReader {
    let provider = "xiaomi"
    var signsPosts: Bool { false }

    /// The receipts asked for: delivered 1, clicked 2, invalid target 16, the app turned Mi Push
    /// off 32, filtered 64, over the daily limit 128.
    static let types = 1 + 2 + 16 + 32 + 64 + 128
    /// Mi Push's limits on the callback's URL and its parameter.
    static let longestURL = 128
    static let longestParam = 64
    /// The most messages one post may name.
    static let mostMessages = 1000

    /// The callback of a delivery's message: under the daemon's public URL (`HERALD_PUBLIC_URL`),
    /// with its report reference; nil when there is no public URL, no reference (not a device's),
    /// or the URL would be over Mi Push's limit.
    static func callback(for delivery: OutgoingDelivery, builder: PayloadBuilder) -> (url: String, param: String)? {
        guard let base = builder.reportBaseURL, let reference = delivery.device?.reportReference,
            reference.utf8.count <= longestParam,
            let app = delivery.appID.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)
        else { return nil }
        let url = "\(base)/v1/receipts/xiaomi/\(app)"
        return url.utf8.count <= longestURL ? (url, reference) : nil
    }

    func receipts(in body: [UInt8]) -> Result<(receipts: [ProviderReceipt], unreadable: Int), ReceiptRefusal> {
        let form = Self.form(String(decoding: body, as: UTF8.self))
        guard let data = form["data"],
            let messages = try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any]
        else {
            return .failure(ReceiptRefusal(.malformed, "the body is not Mi Push's receipts: a form whose data is JSON"))
        }
        guard messages.count <= Self.mostMessages else {
            return .failure(
                ReceiptRefusal(.malformed, "\(messages.count) messages, over the \(Self.mostMessages) a post may hold"))
        }
        var receipts: [ProviderReceipt] = []
        var unreadable = 0
        for (messageID, entry) in messages {
            guard let entry = entry as? [String: Any], let read = Self.receipts(messageID: messageID, entry) else {
                unreadable += 1
                continue
            }
            receipts += read
        }
        return .success((receipts, unreadable))
    }

    var acceptedAnswer: String { #"{"code":0,"message":"success"}"# }

    func refusedAnswer(_ refusal: ReceiptRefusal) -> String {
        JSONValue.object([("code", .int(400)), ("message", .string(refusal.reason))]).encoded
    }

    /// One message's receipt, for each of its targets (Herald names one); nil when it is not one.
    static func receipts(messageID: String, _ entry: [String: Any]) -> [ProviderReceipt]? {
        func printable(_ text: String) -> Bool { text.utf8.allSatisfy { (0x21...0x7E).contains($0) } }
        guard messageID.utf8.count <= 128, printable(messageID),
            // A report reference's shape (43 Base64url characters); anything else is no receipt
            // of Herald's, and costs the database nothing.
            let param = entry["param"] as? String, param.utf8.count == 43,
            param.utf8.allSatisfy({ $0.isBase64URL }),
            let targets = (entry["targets"] as? String)?.split(separator: ",").map(String.init), !targets.isEmpty,
            targets.count <= 1000, targets.allSatisfy({ (1...4096).contains($0.utf8.count) && printable($0) }),
            let type = integer(entry["type"]), let millis = integer(entry["timestamp"]),
            (978_307_200_000...9_999_999_999_999).contains(millis)
        else { return nil }
        let barOff = (entry["barStatus"] as? String) == "Disable"
        let state = Self.state(type, errorCode: integer(entry["errorCode"]), barOff: barOff)
        return targets.map {
            ProviderReceipt(
                deliveryID: nil, reference: param, token: $0, messageID: messageID, delivered: state.delivered,
                meaning: "Mi Push receipt \(type): \(state.words)",
                at: Date(timeIntervalSince1970: Double(millis) / 1000),
                effect: state.effect)
        }
    }

    /// A whole JSON number, or digits in a string (Mi Push's samples show both).
    static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let text as String: Int64(text)
        // JSON's true and false are numbers to Foundation: told apart by their class.
        case let number as NSNumber where String(describing: type(of: number)) != "__NSCFBoolean":
            number.doubleValue.rounded() == number.doubleValue && abs(number.doubleValue) < 1e15
                ? number.int64Value : nil
        default: nil
        }
    }

    /// What a receipt's type means, and what it proves of the device.
    static func state(_ type: Int64, errorCode: Int64?, barOff: Bool) -> (
        delivered: Bool, words: String, effect: ProviderReceipt.Effect
    ) {
        let shown = barOff ? ", but the phone's notifications for the app are turned off" : ""
        switch type {
        case 1: return (true, "delivered to the phone" + shown, barOff ? .notificationsOff : .none)
        case 2: return (true, "the user tapped it", .none)
        case 16:
            return (
                false,
                "the target is invalid (the app is not installed, or its regId is no longer the app's)"
                    + (errorCode.map { ", error \($0)" } ?? ""), .tokenDead
            )
        case 32: return (false, "the app turned Mi Push off on the phone (disablePush)", .notificationsOff)
        case 64: return (false, "filtered out by Mi Push", .none)
        case 128: return (false, "over Mi Push's daily limit for the app", .none)
        default: return (false, "a type Herald does not know (Mi Push's list of receipt types says)", .none)
        }
    }

    /// An `application/x-www-form-urlencoded` body's fields.
    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }
}

extension UInt8 {
    fileprivate var isBase64URL: Bool {
        (48...57).contains(self) || (65...90).contains(self) || (97...122).contains(self) || self == 45 || self == 95
    }
}
