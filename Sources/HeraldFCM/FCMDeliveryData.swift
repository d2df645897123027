import Foundation
import HeraldCore
import HeraldHTTP

/// The FCM Data API's delivery data of one Android app (`GET /v1beta1/projects/{project}/
/// androidApps/{app id}/deliveryData`): a row per day and analytics label, with the count of
/// messages FCM accepted and the shares delivered, pending, collapsed and dropped. Read with the
/// app's service account, under the `cloud-platform` scope the API asks for.
public struct FCMDeliveryData: Sendable {
    public static let defaultEndpoint = "https://fcmdata.googleapis.com"
    public static let scope = "https://www.googleapis.com/auth/cloud-platform"
    /// Rows asked per page (Google's default; at most 10,000).
    public static let pageSize = 1000
    /// Pages read at most in one read: days are few, labels are the producer's.
    public static let mostPages = 20

    /// One row: a day (Google's, America/Los_Angeles, `YYYY-MM-DD`), its analytics label (empty
    /// for messages sent without one), the messages accepted, and Google's whole `data` object.
    public struct Day: Sendable, Equatable {
        public var day: String
        public var label: String
        public var accepted: Int64?
        public var data: String
    }

    let tokens: AccessTokenSource
    let http: HTTPClient
    let base: String

    /// Through `endpoint` (a stand-in's base URL; nil: Google's).
    public init(tokens: AccessTokenSource, http: HTTPClient, endpoint: String? = nil) {
        self.tokens = tokens
        self.http = http
        base =
            (endpoint ?? Self.defaultEndpoint).hasSuffix("/")
            ? String((endpoint ?? Self.defaultEndpoint).dropLast()) : (endpoint ?? Self.defaultEndpoint)
    }

    /// Why a read failed, in words an operator acts on.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Every row Google has for the Android app of Firebase project `project`, page by page.
    public func days(project: String, androidAppID: String) async throws(Failure) -> [Day] {
        var days: [Day] = []
        var pageToken: String?
        for _ in 0..<Self.mostPages {
            let token: String
            do {
                token = try await tokens.token()
            } catch {
                throw Failure(description: "no access token for the FCM Data API: \(error)")
            }
            var url =
                "\(base)/v1beta1/projects/\(Self.escaped(project))/androidApps/\(Self.escaped(androidAppID))/deliveryData"
                + "?pageSize=\(Self.pageSize)"
            if let pageToken { url += "&pageToken=\(Self.escaped(pageToken))" }
            let response: HTTPResponse
            do {
                response = try await http.send(
                    HTTPRequest(
                        method: "GET", url: url,
                        headers: [("Authorization", "Bearer \(token)")], body: [],
                        timeout: .seconds(30)))
            } catch {
                throw Failure(description: "the FCM Data API could not be reached: \(error)")
            }
            guard response.status == 200 else {
                if response.status == 401 { await tokens.rejected(token) }
                throw Failure(description: Self.refusal(response, androidAppID: androidAppID))
            }
            guard let page = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
                throw Failure(description: "the FCM Data API answered 200 with a body that is not JSON")
            }
            for row in page["androidDeliveryData"] as? [[String: Any]] ?? [] {
                if let day = Self.day(row) { days.append(day) }
            }
            pageToken = page["nextPageToken"] as? String
            if pageToken?.isEmpty ?? true { return days }
        }
        return days
    }

    /// A row, or nil when its date is not a day of the calendar.
    static func day(_ row: [String: Any]) -> Day? {
        guard let date = row["date"] as? [String: Any], let year = date["year"] as? Int,
            let month = date["month"] as? Int, let day = date["day"] as? Int, (1...9999).contains(year),
            DateComponents(calendar: Calendar(identifier: .gregorian), year: year, month: month, day: day).isValidDate
        else { return nil }
        let data = row["data"] as? [String: Any] ?? [:]
        let json = (try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys])) ?? Data("{}".utf8)
        // int64 fields are JSON strings in Google's APIs.
        let accepted = (data["countMessagesAccepted"] as? String).flatMap { Int64($0) }
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return Day(
            day: "\(year)-\(two(month))-\(two(day))",
            label: String((row["analyticsLabel"] as? String ?? "").prefix(50)),
            accepted: accepted, data: String(decoding: json, as: UTF8.self))
    }

    /// Google's refusal, with what to do.
    static func refusal(_ response: HTTPResponse, androidAppID: String) -> String {
        let error =
            (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["error"]
            as? [String: Any]
        let words = String((error?["message"] as? String ?? "").prefix(300))
        let status = error?["status"] as? String ?? "HTTP \(response.status)"
        let hint =
            switch response.status {
            case 401, 403:
                ": is the FCM Data API (fcmdata.googleapis.com) enabled in the project, and may the service account read it?"
            case 404: ": is herald.app_fcm.android_app_id (\(androidAppID)) this project's Android app?"
            default: ""
            }
        return "the FCM Data API answered \(response.status) \(status)\(words.isEmpty ? "" : ": \(words)")\(hint)"
    }

    static func escaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~:")))
            ?? text
    }
}
