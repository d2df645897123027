import Foundation
import HeraldCrypto
import HeraldHTTP

/// Huawei Push Kit's message receipts, as its server posts them to an app's receipt URL, for the
/// messages the stand-ins took: V1 (`status`, `timestamp`, `appid`) or V2 (`pushType`,
/// `appPackageName`, `deliveryStatus`), each status naming its token, the message's `biTag` and
/// the send's `requestId`, signed in `X-HUAWEI-CALLBACK-ID` as Huawei's sample code signs it:
/// HMAC-SHA256 of timestamp (milliseconds), nonce and callback user name, with the callback key
/// Base64-decoded.
extension Emulator {
    public enum PushKitReceiptVersion: Sendable {
        case v1, v2
    }

    /// The post of a receipt for each message the Android (`harmony` false) or HarmonyOS stand-in
    /// took (Push Kit merges them into one post), to `url`, in `version`: each of state 0
    /// (delivered) unless `states` gives its token another, at `at`. The signature is made with
    /// `username` and `key` (Base64, as AppGallery Connect gives it) at `signedAt`, with `nonce`.
    public func pushKitReceipts(
        harmony: Bool, to url: String, version: PushKitReceiptVersion, username: String, key: String,
        states: [String: Int] = [:], at: Date, signedAt: Date? = nil, nonce: String = UUID().uuidString.lowercased()
    ) async -> HTTPRequest {
        let millis = Int64((at.timeIntervalSince1970 * 1000).rounded())
        let sent: [(token: String, tag: String?, requestID: String, app: String)] =
            harmony
            ? await harmonyReceived.map { ($0.token, $0.receiptTag, $0.requestID, $0.projectID) }
            : await hmsReceived.filter { !$0.validateOnly }.map { ($0.token, $0.receiptTag, $0.requestID, $0.clientID) }
        let statuses = sent.map { message -> [String: Any] in
            let result = states[message.token] ?? 0
            var status: [String: Any] = ["token": message.token, "requestId": message.requestID]
            if let tag = message.tag { status["biTag"] = tag }
            switch version {
            case .v1:
                status["status"] = result
                status["timestamp"] = millis
                status["appid"] = message.app
            case .v2:
                status["pushType"] = 0
                status["appPackageName"] = "com.example.shop"
                status["deliveryStatus"] = ["result": result, "timestamp": millis]
            }
            return status
        }
        let body =
            (try? JSONSerialization.data(withJSONObject: ["statuses": statuses], options: [.sortedKeys])) ?? Data()
        return HTTPRequest(
            method: "POST", url: url,
            headers: [
                ("Content-Type", "application/json"),
                (
                    "X-HUAWEI-CALLBACK-ID",
                    Self.pushKitCallbackID(username: username, key: key, at: signedAt ?? at, nonce: nonce)
                ),
            ],
            body: [UInt8](body))
    }

    /// `X-HUAWEI-CALLBACK-ID` for a post signed at `at` with `nonce`, as Huawei writes it.
    public static func pushKitCallbackID(username: String, key: String, at: Date, nonce: String) -> String {
        let timestamp = String(Int64((at.timeIntervalSince1970 * 1000).rounded()))
        let keyBytes = Data(base64Encoded: key).map([UInt8].init) ?? [UInt8](key.utf8)
        let value = Data(HMAC.sha256(key: keyBytes, [UInt8]((timestamp + nonce + username).utf8))).base64EncodedString()
        return "timestamp=\(timestamp); nonce=\(nonce); value=\(value)"
    }
}
