import Foundation
import HeraldCore
import HeraldCrypto
import HeraldFCM

/// Everything the emulator knows: trusted accounts, issued tokens, received messages and
/// injected errors.
actor EmulatorState {
    struct Account {
        var project: String
        var keyID: String
        var publicKey: CryptoKey
    }

    struct Answer {
        var status: Int
        var json: String
        var retryAfter: Int? = nil
        var delay: Duration? = nil
    }

    private var accounts: [String: Account] = [:]
    private var accessTokens: [String: (project: String, expires: Date)] = [:]
    /// The access tokens issued for the `cloud-platform` scope, which the FCM Data API asks for.
    private var cloudPlatformTokens: Set<String> = []
    /// The delivery data the FCM Data API's stand-in serves, by project and Android app id.
    private var deliveryData: [String: [String]] = [:]
    private(set) var deliveryDataRequests = 0
    private var behaviours: [String: (behaviour: EmulatorBehaviour, remaining: Int?)] = [:]
    private var tokenFailures: [(status: Int, error: String)] = []
    private var tokenLifetime = 3600
    private(set) var messages: [ReceivedMessage] = []
    private var projectQuotas: [String: (perSecond: Int, retryAfter: Int?)] = [:]
    /// Each project's sends in the current second of the clock.
    private var projectSends: [String: (second: Int, count: Int)] = [:]
    private(set) var quotaRefusals: [String: [Date]] = [:]
    private(set) var tokenRequests = 0
    /// The app instances whose store FCM models (``FCMDevice``), by token.
    private(set) var devices: [String: FCMDevice] = [:]
    private(set) var sendRequests = 0

    func register(email: String, project: String, keyID: String, publicKey: CryptoKey) {
        accounts[email] = Account(project: project, keyID: keyID, publicKey: publicKey)
    }

    func setBehaviour(_ behaviour: EmulatorBehaviour?, token: String, times: Int?) {
        behaviours[token] = behaviour.map { ($0, times) }
    }

    func failTokenRequests(status: Int, count: Int, error: String) {
        tokenFailures += Array(repeating: (status, error), count: count)
    }

    func setTokenLifetime(_ seconds: Int) { tokenLifetime = seconds }

    func setProjectQuota(_ project: String, perSecond: Int?, retryAfter: Int?) {
        projectQuotas[project] = perSecond.map { ($0, retryAfter) }
    }

    func setDevice(_ token: String, online: Bool) {
        devices[token, default: FCMDevice()].setOnline(online, now: Date())
    }

    func makeDeviceInactive(_ token: String) {
        devices[token, default: FCMDevice()].makeInactive()
    }

    func revokeAccessTokens() { accessTokens.removeAll() }
    var issuedAccessTokens: [String] { Array(accessTokens.keys) }

    // MARK: - OAuth

    /// `POST /token` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`.
    func issueToken(form: String) -> (Int, String) {
        tokenRequests += 1
        if !tokenFailures.isEmpty {
            let failure = tokenFailures.removeFirst()
            return (failure.status, oauthError(failure.error, "injected failure"))
        }
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).removingPercentEncoding ?? String($0)
            }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return (400, oauthError("unsupported_grant_type", "Invalid grant_type: \(fields["grant_type"] ?? "")"))
        }
        guard let assertion = fields["assertion"], let jwt = JWT.decode(assertion) else {
            return (400, oauthError("invalid_request", "Invalid JWT: the assertion is not a compact JWT."))
        }
        guard jwt.header["alg"] as? String == "RS256" else {
            return (400, oauthError("invalid_grant", "Invalid JWT: alg must be RS256."))
        }
        guard let issuer = jwt.claims["iss"] as? String, let account = accounts[issuer] else {
            return (400, oauthError("invalid_grant", "Invalid grant: account not found"))
        }
        if let kid = jwt.header["kid"] as? String, !account.keyID.isEmpty, kid != account.keyID {
            return (400, oauthError("invalid_grant", "Invalid JWT Signature: unknown key id \(kid)."))
        }
        guard (try? account.publicKey.verifyRS256(jwt.signingInput, signature: jwt.signature)) == true else {
            return (400, oauthError("invalid_grant", "Invalid JWT Signature."))
        }
        guard jwt.claims["aud"] as? String == JWT.tokenAudience else {
            return (400, oauthError("invalid_grant", "Invalid JWT: Failed audience check."))
        }
        let now = Date().timeIntervalSince1970
        guard let issued = (jwt.claims["iat"] as? NSNumber)?.doubleValue,
            let expires = (jwt.claims["exp"] as? NSNumber)?.doubleValue
        else { return (400, oauthError("invalid_grant", "Invalid JWT: iat and exp are required.")) }
        guard issued <= now + 60, expires > now, expires - issued <= 3600 else {
            return (
                400,
                oauthError(
                    "invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
                )
            )
        }
        let scopes = (jwt.claims["scope"] as? String ?? "").split(separator: " ")
        guard
            scopes.contains(where: {
                $0 == JWT.messagingScope || $0 == "https://www.googleapis.com/auth/cloud-platform"
            })
        else { return (400, oauthError("invalid_scope", "The scope does not allow FCM sends.")) }

        let token = "emulator-" + UUID().uuidString.lowercased()
        accessTokens[token] = (account.project, Date().addingTimeInterval(Double(tokenLifetime)))
        if scopes.contains("https://www.googleapis.com/auth/cloud-platform") { cloudPlatformTokens.insert(token) }
        return (200, #"{"access_token":"\#(token)","expires_in":\#(tokenLifetime),"token_type":"Bearer"}"#)
    }

    private func oauthError(_ code: String, _ description: String) -> String {
        JSONValue.object([("error", .string(code)), ("error_description", .string(description))]).encoded
    }

    // MARK: - Send

    /// `POST /v1/projects/{project}/messages:send`.
    func send(path: String, authorization: String?, body: Data) -> Answer {
        sendRequests += 1
        let pieces = path.split(separator: "/")
        guard pieces.count == 4, pieces[0] == "v1", pieces[1] == "projects", pieces[3] == "messages:send" else {
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: nil)
        }
        let project = String(pieces[2])
        guard let bearer = authorization, bearer.hasPrefix("Bearer "),
            let grant = accessTokens[String(bearer.dropFirst(7))], grant.expires > Date()
        else {
            return fcmError(
                401, "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
                errorCode: nil)
        }
        guard grant.project == project else {
            return fcmError(
                403, "PERMISSION_DENIED",
                "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)'.",
                errorCode: nil)
        }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return fcmError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", errorCode: "INVALID_ARGUMENT")
        }
        if let problem = MessageValidator.validate(object) {
            return fcmError(
                400, "INVALID_ARGUMENT", problem.message, errorCode: "INVALID_ARGUMENT", field: problem.field)
        }
        if let quota = projectQuotas[project] {
            let now = Date()
            let second = Int(now.timeIntervalSince1970)
            let sends = projectSends[project].flatMap { $0.second == second ? $0.count : nil } ?? 0
            guard sends < quota.perSecond else {
                quotaRefusals[project, default: []].append(now)
                return projectOverQuota(project, retryAfter: quota.retryAfter)
            }
            projectSends[project] = (second, sends + 1)
        }
        let message = object["message"] as! [String: Any]
        let target = (message["token"] ?? message["topic"] ?? message["condition"] ?? message["fid"]) as? String ?? ""
        var delay: Duration?
        if let injected = behaviours[target] {
            if let remaining = injected.remaining {
                behaviours[target] = remaining <= 1 ? nil : (injected.behaviour, remaining - 1)
            }
            switch injected.behaviour {
            case .slow(let milliseconds):
                delay = .milliseconds(milliseconds)
            default:
                return answer(for: injected.behaviour)
            }
        }
        let name = "projects/\(project)/messages/\(messages.count + 1)"
        let messageJSON = String(
            decoding: try! JSONSerialization.data(withJSONObject: message, options: [.sortedKeys]), as: UTF8.self)
        let validateOnly = (object["validate_only"] ?? object["validateOnly"]) as? Bool ?? false
        let received = ReceivedMessage(
            projectID: project, target: target, json: messageJSON, validateOnly: validateOnly, name: name, at: Date())
        messages.append(received)
        if !validateOnly, devices[target] != nil { devices[target]?.accept(received, now: received.at) }
        return Answer(status: 200, json: #"{"name":"\#(name)"}"#, delay: delay)
    }

    // MARK: - Delivery data

    /// Serves `rows` (AndroidDeliveryData objects, as JSON) for `appID` of `project`.
    func setDeliveryData(project: String, appID: String, rows: [String]) {
        deliveryData["\(project)/\(appID)"] = rows
    }

    /// `GET /v1beta1/projects/{project}/androidApps/{app id}/deliveryData`, as the FCM Data API
    /// answers it: a token of the project's with the `cloud-platform` scope (403 without it),
    /// `pageSize` from 1 (default 1000, more taken as 10,000), pages chained by `pageToken`, 404
    /// for an app it has no data of.
    func deliveryData(path: String, query: [String: String], authorization: String?) -> Answer {
        deliveryDataRequests += 1
        let pieces = path.split(separator: "/").map(String.init)
        guard pieces.count == 6, pieces[0] == "v1beta1", pieces[1] == "projects", pieces[3] == "androidApps",
            pieces[5] == "deliveryData"
        else { return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: nil) }
        let project = pieces[2]
        let appID = pieces[4].removingPercentEncoding ?? pieces[4]
        guard let bearer = authorization, bearer.hasPrefix("Bearer "),
            let grant = accessTokens[String(bearer.dropFirst(7))], grant.expires > Date()
        else {
            return fcmError(
                401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", errorCode: nil)
        }
        guard grant.project == project, cloudPlatformTokens.contains(String(bearer.dropFirst(7))) else {
            return fcmError(
                403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.", errorCode: nil)
        }
        guard appID.contains(":android:"), let rows = deliveryData["\(project)/\(appID)"] else {
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: nil)
        }
        let size = query["pageSize"].map { Int($0) ?? -1 } ?? 1000
        guard size >= 0 else {
            return fcmError(400, "INVALID_ARGUMENT", "Invalid value at 'page_size' (TYPE_INT32)", errorCode: nil)
        }
        let pageSize = size == 0 ? 1000 : min(size, 10_000)
        let start = query["pageToken"].flatMap { Int($0) } ?? 0
        guard start >= 0, start <= rows.count else {
            return fcmError(400, "INVALID_ARGUMENT", "Invalid page token.", errorCode: nil)
        }
        let page = rows[start..<min(rows.count, start + pageSize)]
        let next = start + pageSize < rows.count ? #","nextPageToken":"\#(start + pageSize)""# : ""
        return Answer(status: 200, json: #"{"androidDeliveryData":["# + page.joined(separator: ",") + "]" + next + "}")
    }

    private func answer(for behaviour: EmulatorBehaviour) -> Answer {
        switch behaviour {
        case .unregistered, .unregisteredSince, .gone:
            return fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED")
        case .payloadTooLarge:
            return fcmError(
                400, "INVALID_ARGUMENT", "Request contains an invalid argument: message is too big",
                errorCode: "INVALID_ARGUMENT")
        case .invalidToken:
            return fcmError(
                400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                errorCode: "INVALID_ARGUMENT", field: "message.token")
        case .senderIDMismatch:
            return fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
        case .quotaExceeded(let retryAfter):
            var answer = fcmError(429, "RESOURCE_EXHAUSTED", "Quota exceeded.", errorCode: "QUOTA_EXCEEDED")
            answer.retryAfter = retryAfter
            return answer
        case .unavailable(let retryAfter):
            var answer = fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
            answer.retryAfter = retryAfter
            return answer
        case .internalError:
            return fcmError(500, "INTERNAL", "Internal error encountered.", errorCode: "INTERNAL")
        case .thirdPartyAuthError, .expiredProviderToken:
            return fcmError(
                401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", errorCode: "THIRD_PARTY_AUTH_ERROR")
        case .invalidMessage:
            return fcmError(
                400, "INVALID_ARGUMENT", "Request contains an invalid argument.", errorCode: "INVALID_ARGUMENT")
        case .garbledAnswer:
            return fcmError(400, "INVALID_ARGUMENT", "bad\u{0}argument\r\n\u{7}", errorCode: "INVALID_ARGUMENT")
        case .slow:
            return Answer(status: 200, json: "{}")
        }
    }

    /// FCM's answer to a project over its quota: Google's API quota error, with no FcmError
    /// detail (as firebase/firebase-admin-go#719 shows it).
    private func projectOverQuota(_ project: String, retryAfter: Int?) -> Answer {
        let error: [String: Any] = [
            "code": 429, "status": "RESOURCE_EXHAUSTED",
            "message":
                "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service"
                + " 'fcm.googleapis.com' for consumer 'project_number:\(project)'.",
            "details": [
                [
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": [
                        "quota_metric": "fcm.googleapis.com/send_requests", "quota_unit": "1/min/{project}",
                        "quota_limit": "SendsPerMinutePerProject", "service": "fcm.googleapis.com",
                    ],
                ]
            ],
        ]
        let json = String(
            decoding: try! JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys]),
            as: UTF8.self)
        return Answer(status: 429, json: json, retryAfter: retryAfter)
    }

    private func fcmError(_ code: Int, _ status: String, _ message: String, errorCode: String?, field: String? = nil)
        -> Answer
    {
        var details: [[String: Any]] = []
        if let errorCode {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
        }
        if let field {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [["field": field, "description": message]],
            ])
        }
        var error: [String: Any] = ["code": code, "message": message, "status": status]
        if !details.isEmpty { error["details"] = details }
        let json = String(
            decoding: try! JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys]),
            as: UTF8.self)
        return Answer(status: code, json: json)
    }
}

extension EmulatorState: EmulatedService {
    /// Google's token endpoint and FCM's sends, the modelled app instances, and what lists what was received.
    nonisolated func addRoutes(to router: inout EmulatorRouter) {
        let state = self
        router.add("POST /token") { request in
            let body = String(decoding: request.body, as: UTF8.self)
            let (status, json) = await state.issueToken(form: body)
            return EmulatorRouter.json(status, json)
        }
        router.add("POST /v1/projects/*") { request in
            let body = request.body
            let answer = await state.send(
                path: request.path, authorization: request.headers["authorization"], body: body)
            return try await EmulatorRouter.json(
                answer.status, answer.json, after: answer.delay, retryAfter: answer.retryAfter)
        }
        router.add("GET /v1beta1/projects/*") { request in
            let answer = await state.deliveryData(
                path: request.path, query: request.query, authorization: request.headers["authorization"])
            return EmulatorRouter.json(answer.status, answer.json)
        }
        router.add("POST /emulator/fcm-devices") { request in
            let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:]
            guard let token = object["token"] as? String else {
                return EmulatorRouter.json(
                    400, #"{"error":"expected {\"token\", \"online\": true or false, or \"inactive\": true}"}"#)
            }
            if object["inactive"] as? Bool == true {
                await state.makeDeviceInactive(token)
            } else if let online = object["online"] as? Bool {
                await state.setDevice(token, online: online)
            } else {
                return EmulatorRouter.json(
                    400, #"{"error":"expected {\"token\", \"online\": true or false, or \"inactive\": true}"}"#)
            }
            let device = await state.devices[token] ?? FCMDevice()
            let received = device.received.map { $0.json }.joined(separator: ",")
            return EmulatorRouter.json(
                200,
                "{\"online\":\(device.online),\"stored\":\(device.storedCount),\"deleted_notices\":\(device.deletedNotices),\"received\":[\(received)]}"
            )
        }
        router.add("GET /emulator/messages") { _ in
            let messages = await state.messages
            let list = messages.map {
                "{\"project\":\(EmulatorRouter.quote($0.projectID)),\"name\":\(EmulatorRouter.quote($0.name)),\"validate_only\":\($0.validateOnly),\"message\":\($0.json)}"
            }
            return EmulatorRouter.json(200, "[" + list.joined(separator: ",") + "]")
        }
    }
}
