import Foundation
import HeraldCore
import HeraldHTTP

/// Turns an FCM v1 response into an ``PushOutcome``, following the table of FCM's answers in
/// `docs/architecture.md` (from Google's FCM v1 error reference): the
/// `google.firebase.fcm.v1.FcmError` detail's `errorCode` decides, never the generic top-level
/// `status`.
public enum FCMErrorClassifier {
    /// How long a target over its rate (`QUOTA_EXCEEDED`) waits at the least, and the project
    /// after a 429 that gives no `Retry-After`.
    public static let quotaFloor: Duration = .seconds(60)
    /// The shortest and the longest a project waits after a 429 for its quota, whatever
    /// `Retry-After` says.
    public static let shortestPause: Duration = .seconds(5)
    public static let longestPause: Duration = .seconds(3600)

    /// What FCM's error body says.
    public struct ErrorBody: Sendable, Equatable {
        public var status: String?
        public var message: String
        /// The FcmError detail's `errorCode`, when present.
        public var errorCode: String?
        /// Fields named by a `google.rpc.BadRequest` detail.
        public var fieldViolations: [String]
        /// The `reason` of a `google.rpc.ErrorInfo` detail: `RATE_LIMIT_EXCEEDED` when the
        /// project's quota ran out.
        public var errorInfoReason: String? = nil
    }

    /// Classifies a response; `accessTokenRejected` is true for a 401 that only means the access
    /// token was refused (the caller refreshes and retries before giving up).
    public static func classify(_ response: HTTPResponse, now: Date) -> (
        outcome: PushOutcome, accessTokenRejected: Bool
    ) {
        if response.status == 200 {
            let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            return (.sent(messageName: object?["name"] as? String ?? ""), false)
        }
        let error = parseError(response.body)
        let retryAfter = response.retryAfter(now: now)
        let code = error.errorCode
        let reason = describe(status: response.status, error)
        switch response.status {
        case 400:
            if names(token: error) { return (.tokenInvalid(reason: reason), false) }
            return (.permanentFailure(reason: reason), false)
        case 401:
            // The app's APNs key or certificate in Firebase: only iOS sends are refused.
            if code == "THIRD_PARTY_AUTH_ERROR" { return (.configurationError(reason: reason, scope: .fcmAPNs), false) }
            return (.configurationError(reason: reason, scope: .fcm), true)
        case 403:
            if code == "SENDER_ID_MISMATCH" { return (.tokenInvalid(reason: reason), false) }
            return (.configurationError(reason: reason, scope: .fcm), false)
        case 404:
            if code == "UNREGISTERED" { return (.tokenInvalid(reason: reason), false) }
            // A 404 without UNREGISTERED is a wrong project or URL: the sender's fault.
            return (.configurationError(reason: reason, scope: .fcm), false)
        case 429:
            // The project's quota answers with Google's ErrorInfo (RATE_LIMIT_EXCEEDED, quota
            // "SendsPerMinutePerProject"), one device's or topic's rate with FcmError
            // QUOTA_EXCEEDED alone; a 429 with neither is FCM overloaded, which the whole
            // project waits out too.
            if code == "QUOTA_EXCEEDED" && error.errorInfoReason != "RATE_LIMIT_EXCEEDED" {
                return (.retry(after: max(retryAfter ?? .zero, quotaFloor), reason: reason), false)
            }
            // A Retry-After of 0 (or a date past) would resend at once, without end.
            let wait = min(max(retryAfter ?? quotaFloor, shortestPause), longestPause)
            return (.overQuota(after: wait, reason: reason), false)
        case 500...599:
            return (.retry(after: retryAfter, reason: reason), false)
        default:
            return (.permanentFailure(reason: reason), false)
        }
    }

    /// A 400 is the token's fault only when it says so.
    static func names(token error: ErrorBody) -> Bool {
        guard error.errorCode == nil || error.errorCode == "INVALID_ARGUMENT" else { return false }
        if error.fieldViolations.contains("message.token") { return true }
        let message = error.message.lowercased()
        return message.contains("registration token") && message.contains("not a valid")
    }

    static func describe(status: Int, _ error: ErrorBody) -> String {
        let code = error.errorCode ?? error.status ?? "HTTP \(status)"
        return error.message.isEmpty ? "\(status) \(code)" : "\(status) \(code): \(error.message)"
    }

    public static func parseError(_ body: [UInt8]) -> ErrorBody {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else {
            let text = String(decoding: body.prefix(200), as: UTF8.self)
            return ErrorBody(status: nil, message: text, errorCode: nil, fieldViolations: [])
        }
        var errorCode: String?
        var errorInfoReason: String?
        var violations: [String] = []
        for detail in error["details"] as? [[String: Any]] ?? [] {
            switch detail["@type"] as? String {
            case "type.googleapis.com/google.firebase.fcm.v1.FcmError":
                errorCode = detail["errorCode"] as? String
            case "type.googleapis.com/google.rpc.ErrorInfo":
                errorInfoReason = detail["reason"] as? String
            case "type.googleapis.com/google.rpc.BadRequest":
                for violation in detail["fieldViolations"] as? [[String: Any]] ?? [] {
                    if let field = violation["field"] as? String { violations.append(field) }
                }
            default:
                break
            }
        }
        return ErrorBody(
            status: error["status"] as? String, message: error["message"] as? String ?? "", errorCode: errorCode,
            fieldViolations: violations, errorInfoReason: errorInfoReason)
    }
}

extension ConfigurationScope {
    /// The app's FCM credentials: everything sent through FCM.
    public static let fcm: Self = "fcm"
    /// The app's APNs key or certificate in Firebase: iOS deliveries through FCM.
    public static let fcmAPNs: Self = "fcm_apns"
}
