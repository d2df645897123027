import Foundation
import HeraldCore
import HeraldCrypto

/// Huawei Push Kit's message receipts, as its server posts them to the app's receipt URL, for
/// Android phones (`hms`, receipts V1 or V2) and HarmonyOS (`harmony`, V2 only): signed in the
/// `X-HUAWEI-CALLBACK-ID` header (`timestamp=…;nonce=…;value=…`, the value the Base64 of the
/// HMAC-SHA256 of timestamp, nonce and callback user name, joined, with the callback key), and
/// `{"statuses": [...]}` in the body. Each message carries its delivery's tag as `biTag`
/// (``ProviderReceipt/tag(deliveryID:)``), which its receipt gives back.
public struct PushKitReceipts: ReceiptReader {
    public let provider: String
    public let settingsTable: String

    public static let android = PushKitReceipts(provider: "hms", settingsTable: "herald.app_hms")
    public static let harmony = PushKitReceipts(provider: "harmony", settingsTable: "herald.app_harmony")

    /// How far a signature's time may be from now: Huawei documents no window; five minutes
    /// either way takes a late post and a clock a little off, and refuses one kept to replay.
    public static let window: TimeInterval = 300
    /// The most statuses one post holds (Huawei merges up to 1000 in one, by its older page; 100
    /// by its newer ones).
    public static let mostStatuses = 1000

    /// The header's parts, once its shape and time are right: `timestamp=…; nonce=…; value=…`
    /// (spaces after the semicolons or not, as Huawei's pages differ), the time in milliseconds
    /// (13 digits, as every example of Huawei's is: with one form only, no signed text reads two
    /// ways), within ``window`` of `now`.
    func header(_ headers: [String: String], now: Date) -> Result<
        (timestamp: String, nonce: String, value: [UInt8]), ReceiptRefusal
    > {
        guard let header = headers["x-huawei-callback-id"] else {
            return .failure(
                ReceiptRefusal(
                    .unauthenticated,
                    "no X-HUAWEI-CALLBACK-ID header: set the callback user name and key of the app's receipt"
                        + " configuration in AppGallery Connect"))
        }
        var fields: [String: String] = [:]
        for pair in header.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            fields[parts[0].trimmingCharacters(in: .whitespaces).lowercased()] = parts[1]
                .trimmingCharacters(in: .whitespaces)
        }
        guard let timestamp = fields["timestamp"], let nonce = fields["nonce"], let value = fields["value"] else {
            return .failure(
                ReceiptRefusal(.unauthenticated, "X-HUAWEI-CALLBACK-ID lacks its timestamp, nonce or value"))
        }
        guard let signedAt = Self.time(timestamp) else {
            return .failure(
                ReceiptRefusal(
                    .unauthenticated, "X-HUAWEI-CALLBACK-ID's timestamp is not a time in milliseconds (13 digits)"))
        }
        guard abs(signedAt.timeIntervalSince(now)) <= Self.window else {
            return .failure(
                ReceiptRefusal(
                    .unauthenticated,
                    "the receipt was signed at \(signedAt), more than 5 minutes from now: a replay, or a clock that is off"
                ))
        }
        guard (1...64).contains(nonce.utf8.count), nonce.utf8.allSatisfy({ $0.isReceiptNonceByte }) else {
            return .failure(
                ReceiptRefusal(.unauthenticated, "X-HUAWEI-CALLBACK-ID's nonce is not a UUID's letters and digits"))
        }
        guard let given = Data(base64Encoded: value).map([UInt8].init), given.count == 32 else {
            return .failure(
                ReceiptRefusal(.unauthenticated, "X-HUAWEI-CALLBACK-ID's value is not a Base64 HMAC-SHA256"))
        }
        return .success((timestamp, nonce, given))
    }

    public func screen(headers: [String: String], now: Date) -> ReceiptRefusal? {
        if case .failure(let refusal) = header(headers, now: now) { return refusal }
        return nil
    }

    /// The replay key is the whole signed text but the user name: the time and the nonce.
    public func authenticate(headers: [String: String], credentials: ReceiptCredentials, now: Date) -> Result<
        String, ReceiptRefusal
    > {
        let parts: (timestamp: String, nonce: String, value: [UInt8])
        switch header(headers, now: now) {
        case .success(let checked): parts = checked
        case .failure(let refusal): return .failure(refusal)
        }
        let signed = [UInt8]((parts.timestamp + parts.nonce + credentials.username).utf8)
        guard Self.keys(credentials.key).contains(where: { Self.same(HMAC.sha256(key: $0, signed), parts.value) })
        else {
            return .failure(
                ReceiptRefusal(
                    .unauthenticated,
                    "the X-HUAWEI-CALLBACK-ID signature does not match: are herald.\(settingsTable.dropFirst(7))"
                        + ".receipt_username and the key in receipt_key_file the receipt configuration's?"))
        }
        return .success("\(parts.timestamp):\(parts.nonce)")
    }

    public func receipts(in body: [UInt8]) -> Result<(receipts: [ProviderReceipt], unreadable: Int), ReceiptRefusal> {
        guard let post = try? JSONDecoder().decode(Post.self, from: Data(body)) else {
            return .failure(ReceiptRefusal(.malformed, #"the body is not Push Kit's receipts: {"statuses": [...]}"#))
        }
        guard post.statuses.count <= Self.mostStatuses else {
            return .failure(
                ReceiptRefusal(
                    .malformed, "\(post.statuses.count) statuses, over the \(Self.mostStatuses) a post may hold"))
        }
        let receipts = post.statuses.compactMap { $0.value.flatMap(Self.receipt) }
        return .success((receipts, post.statuses.count - receipts.count))
    }

    public var acceptedAnswer: String { #"{"code":"0","message":"success"}"# }

    public func refusedAnswer(_ refusal: ReceiptRefusal) -> String {
        JSONValue.object([
            ("code", .string(refusal.kind == .unauthenticated ? "401" : "400")), ("message", .string(refusal.reason)),
        ]).encoded
    }

    /// A post's body: `statuses`, each read on its own, so one that is not a status spoils
    /// only itself.
    struct Post: Decodable {
        var statuses: [Lenient<Status>]
    }

    struct Lenient<Value: Decodable>: Decodable {
        var value: Value?
        init(from decoder: any Decoder) throws { value = try? Value(from: decoder) }
    }

    /// One status, V1 (`status`, `timestamp`) or V2 (`deliveryStatus` or, for a widget,
    /// `formStatus`, each `{result, timestamp}`).
    struct Status: Decodable {
        struct Outcome: Decodable {
            var result: Int64
            var timestamp: Int64
        }
        var token: String
        var biTag: String?
        var requestId: String?
        var status: Int64?
        var timestamp: Int64?
        var deliveryStatus: Outcome?
        var formStatus: Outcome?
    }

    /// The receipt a status gives; nil when it lacks what one needs.
    static func receipt(_ status: Status) -> ProviderReceipt? {
        // Tokens and request ids are printable ASCII; anything else (a NUL, a newline) is not a
        // status of Huawei's, and could not be stored.
        func printable(_ text: String) -> Bool { text.utf8.allSatisfy { (0x21...0x7E).contains($0) } }
        guard (1...4096).contains(status.token.utf8.count), printable(status.token),
            (status.requestId?.utf8.count ?? 0) <= 128, status.requestId.map(printable) ?? true
        else { return nil }
        let outcome =
            status.deliveryStatus ?? status.formStatus
            ?? status.status.flatMap { code in status.timestamp.map { Status.Outcome(result: code, timestamp: $0) } }
        guard let outcome, let at = time(String(outcome.timestamp)) else { return nil }
        let state = Self.state(outcome.result)
        return ProviderReceipt(
            deliveryID: ProviderReceipt.deliveryID(tag: status.biTag), token: status.token,
            messageID: status.requestId, delivered: outcome.result == 0,
            meaning: "Huawei Push Kit receipt \(outcome.result): \(state.words)", at: at, effect: state.effect)
    }

    /// A time in milliseconds since 1970, 13 digits (2001 to 2286), as every example of Huawei's
    /// is; one of its pages says seconds, but none shows them.
    static func time(_ text: String) -> Date? {
        guard text.utf8.count == 13, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = Int64(text) else {
            return nil
        }
        return Date(timeIntervalSince1970: Double(value) / 1000)
    }

    /// The callback key's bytes: Huawei's newer receipt configurations give it in Base64, to be
    /// decoded; older ones are used as they are written. Both are tried.
    static func keys(_ file: [UInt8]) -> [[UInt8]] {
        let text = String(decoding: file, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let written = [UInt8](text.utf8)
        guard let decoded = Data(base64Encoded: text), !decoded.isEmpty else { return [written] }
        return [[UInt8](decoded), written]
    }

    /// Equal, in a time that does not depend on where they differ.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// What a receipt's code means (Huawei's receipt states, for Android and HarmonyOS), and what
    /// it proves of the device.
    static func state(_ code: Int64) -> (words: String, effect: ProviderReceipt.Effect) {
        switch code {
        case 0: ("delivered to the device", .none)
        case 2: ("the app is not installed on the device (its token is dead)", .tokenDead)
        case 5:
            (
                "the token is no longer the app's on the device (its data cleared, reinstalled, the token deleted,"
                    + " or the phone reset)", .tokenDead
            )
        case 6:
            (
                "not shown: notifications are turned off on the device (by the user, for the app's channel,"
                    + " or by the app)", .notificationsOff
            )
        case 10: ("the device has not been online for 30 days: Push Kit did not send it", .none)
        case 14: ("an error at Huawei (its internal network)", .none)
        case 15:
            ("overwritten: over Push Kit's store of offline messages for the device, or a newer one replaced it", .none)
        case 22: ("the token is another user's of the device (a phone with several users, or Private Space)", .none)
        case 27: ("the app's process is not running: Push Kit keeps the message until it starts", .none)
        case 31: ("the device's system or app cannot take it (the page it opens does not exist)", .none)
        case 51: ("the device restarted and is not unlocked yet", .none)
        case 102: ("dropped by Push Kit's frequency control (3000 messages a day for an app on a device)", .none)
        case 144: ("the profile it names does not exist", .none)
        case 151: ("not shown: the message, or the widget it updates, does not exist", .none)
        case 155, 156, 158, 265, 268, 269:
            ("a live view update was refused (not created, ended, out of order, or a repeat)", .none)
        case 188: ("the app could not be started", .none)
        case 191: ("the badge could not be updated", .none)
        case 201:
            ("held by Push Kit's sending control (the token's user, notifications off, or the app removed)", .none)
        case 256: ("over the frequency limit of its kind of message", .none)
        case 259: ("refused for its content or a link in it", .none)
        case 261, 262: ("the widget it updates is gone, or updated too often", .none)
        case 264: ("the user has not subscribed to it", .none)
        default: ("a state Herald does not know (Huawei's list of receipt states says)", .none)
        }
    }
}

extension UInt8 {
    /// A UUID's letters, digits and hyphens.
    fileprivate var isReceiptNonceByte: Bool {
        (48...57).contains(self) || (65...90).contains(self) || (97...122).contains(self) || self == 45
    }
}
