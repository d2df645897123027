import Foundation
import HeraldCore
import HeraldHTTP

/// APNs' channel-management API for one app (iOS 18 broadcast push, Apple's "Sending channel
/// management requests to APNs"): on its own host and port per environment, create a channel
/// (`POST /1/apps/{bundle id}/channels`, 201 and the id in `apns-channel-id`), read one (`GET`,
/// with `apns-channel-id`), delete one (`DELETE`, 204) and list them all
/// (`GET /1/apps/{bundle id}/all-channels`). Authenticated as the app's pushes are.
public struct APNsChannelClient: Sendable {
    /// What APNs answered.
    public enum Outcome: Sendable, Equatable {
        case created(channelID: String)
        case deleted
        /// A channel's message storage policy: whether APNs keeps its most recent message.
        case found(storesLatest: Bool)
        case listed(channelIDs: [String])
        /// APNs does not know the channel (ChannelNotRegistered, BadChannelId): deleted, or never
        /// this app's.
        case unknownChannel(reason: String)
        /// Refused for good: the request, or the channel (a 400; 403 TopicMismatch: not the key's
        /// or certificate's bundle).
        case refused(reason: String)
        /// Worth trying again later: unreachable, the app's credentials refused (an operator may
        /// fix them: another 403), 429, 5xx.
        case retry(after: Duration?, reason: String)
    }

    public let authentication: APNsAuthentication
    private let bundleID: String
    private let baseURL: String
    private let http: HTTPClient
    private let timeout: Duration
    private let clock: any WallClock

    /// `baseURL` overrides the environment's management host (a local stand-in).
    public init(
        authentication: APNsAuthentication, bundleID: String, environment: APNsEnvironment, baseURL: String? = nil,
        http: HTTPClient, timeout: Duration = .seconds(10), clock: any WallClock = SystemClock()
    ) {
        self.authentication = authentication
        self.bundleID = bundleID
        let base = baseURL ?? environment.channelManagementURL
        self.baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.http = http
        self.timeout = timeout
        self.clock = clock
    }

    /// Creates a channel for Live Activities; `storesLatest` is its message storage policy
    /// (1: APNs keeps the most recent message for devices offline; 0: none, and a larger
    /// publishing budget). The policy cannot change later.
    public func create(storesLatest: Bool) async -> Outcome {
        let body = #"{"message-storage-policy":\#(storesLatest ? 1 : 0),"push-type":"LiveActivity"}"#
        return await request("POST", "channels", channelID: nil, body: Array(body.utf8)) { response in
            guard response.status == 201, let id = response.header("apns-channel-id"), !id.isEmpty else { return nil }
            return .created(channelID: id)
        }
    }

    public func read(channelID: String) async -> Outcome {
        await request("GET", "channels", channelID: channelID) { response in
            guard response.status == 200,
                let document = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any],
                let policy = document["message-storage-policy"] as? Int
            else { return nil }
            return .found(storesLatest: policy == 1)
        }
    }

    public func delete(channelID: String) async -> Outcome {
        await request("DELETE", "channels", channelID: channelID) { $0.status == 204 ? .deleted : nil }
    }

    public func list() async -> Outcome {
        await request("GET", "all-channels", channelID: nil) { response in
            guard response.status == 200,
                let document = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any],
                let ids = document["channels"] as? [String]
            else { return nil }
            return .listed(channelIDs: ids)
        }
    }

    /// Sends one request, and reads a success with `success` (nil: not the success it expects).
    /// An expired provider token is replaced and the request tried once more.
    private func request(
        _ method: String, _ resource: String, channelID: String?, body: [UInt8] = [],
        success: (HTTPResponse) -> Outcome?
    ) async -> Outcome {
        for round in 0..<2 {
            var headers: [(name: String, value: String)] = [("apns-request-id", UUID().uuidString.lowercased())]
            if let channelID { headers.append(("apns-channel-id", channelID)) }
            if !body.isEmpty { headers.append(("content-type", "application/json")) }
            let bearer: String?
            do {
                bearer = try await authentication.bearer()
            } catch {
                return .refused(reason: "\(error)")
            }
            if let bearer { headers.append(("authorization", "bearer \(bearer)")) }
            let result = await http.send([
                HTTPRequest(
                    method: method, url: "\(baseURL)/1/apps/\(bundleID)/\(resource)", headers: headers, body: body,
                    timeout: timeout, clientCertificate: authentication.clientCertificate)
            ])[0]
            let response: HTTPResponse
            switch result {
            // A request that cannot be sent (a bundle id with a control character) never will be.
            case .failure(let error) where error.kind == .invalidRequest:
                return .refused(reason: error.reason(sendingTo: "APNs"))
            case .failure(let error): return .retry(after: nil, reason: error.reason(sendingTo: "APNs"))
            case .success(let answered): response = answered
            }
            if let outcome = success(response) { return outcome }
            let refusal = APNsRefusal(response)
            let described = refusal.described
            switch (response.status, refusal.reason) {
            case (403, "ExpiredProviderToken") where round == 0:
                await authentication.expired(bearer)
                continue
            case (400, "ChannelNotRegistered"), (400, "BadChannelId"):
                return .unknownChannel(reason: described)
            case (403, let reason) where reason != "TopicMismatch":
                return .retry(after: nil, reason: described)
            case (429, _), (500..<600, _):
                return .retry(after: response.retryAfter(now: clock.now()), reason: described)
            default:
                return .refused(reason: described)
            }
        }
        return .retry(after: nil, reason: "APNs refused a new provider token as expired")
    }
}

extension APNsEnvironment {
    /// The channel-management host: its own, with its own port per environment.
    public var channelManagementURL: String {
        switch self {
        case .production: "https://api-manage-broadcast.push.apple.com:2196"
        case .development: "https://api-manage-broadcast.sandbox.push.apple.com:2195"
        }
    }
}
