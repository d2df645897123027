import ArgumentParser
import Foundation
import HeraldAPNs
import HeraldCore
import HeraldCrypto
import HeraldFCM
import HeraldHTTP
import HeraldWebPush

/// `herald-bench paths`: what each provider's client costs per delivery, with no database in
/// the way: FCM, APNs and Web Push messages of a notification's size, sent in the dispatch
/// worker's batches through one shared HTTP/2 client to a stand-in that answers as all three
/// (`scripts/lib/nginx-standin.sh`). The paths take turns, round after round, so that the
/// machine's drift falls on all of them alike; each round prints the process's CPU time per
/// delivery for each, and the end the medians and each path's difference from FCM's.
struct PathsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paths", abstract: "CPU per delivery of the FCM, APNs and Web Push clients, taking turns.")

    @Option(help: "The stand-in's base URL (https://127.0.0.1:PORT).") var base: String
    @Option(help: "A CA bundle to trust (the stand-in's self-signed certificate).") var caBundle: String?
    @Option(help: "Deliveries per path and round.") var count = 20_000
    @Option(help: "Rounds.") var rounds = 5
    @Option(help: "Deliveries per batch (the dispatch worker's claim).") var batch = 500
    @Option(help: "The paths to run, comma-separated (fcm is always run: the others are measured against it).")
    var paths = "fcm,apns,web"

    func run() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.caBundle = caBundle
        let http = HTTPClient(configuration: configuration)
        let account = try ServiceAccount.generate(projectID: "bench", tokenURI: base + "/token")
        let fcm = FCMClient(
            tokens: AccessTokenSource(account: account, http: http), http: http,
            configuration: FCMClient.Configuration(endpoint: base))
        let apns = APNsClient(
            authentication: .token(
                try APNsProviderTokens(teamID: "TEAM000001", keyID: "KEY0000001", key: try CryptoKey.generateP256())),
            environment: .development, baseURL: base, http: http)
        let web = WebPushClient(
            authorizations: VAPIDAuthorizations(
                key: try VAPIDKey(key: try CryptoKey.generateP256(), subject: "mailto:bench@example.org")),
            http: http, policy: WebPushEndpointPolicy(hosts: ["*"], privateAddresses: true))
        // Device tokens as dispatch reads them from its claim, and a key pair per browser, as
        // browsers have.
        let deviceTokens = (0..<count).map { String(repeating: "0", count: 56) + String(format: "%08x", $0) }
        let browserKeys = try (0..<count).map { _ in try CryptoKey.generateP256().publicPoint() }
        let document = { (index: Int) -> [UInt8] in
            Array(
                #"{"title":"Hello","body":"A benchmark notification","data":{"order":"42"},"herald_delivery":"\#(index)"}"#
                    .utf8)
        }
        let apnsPayload = { (index: Int) -> [UInt8] in
            Array(
                #"{"aps":{"alert":{"title":"Hello","body":"A benchmark notification"},"mutable-content":1},"order":"42","herald_delivery":"\#(index)"}"#
                    .utf8)
        }

        typealias Path = (name: String, send: (Range<Int>) async throws -> [PushOutcome])
        let wanted = Set(self.paths.split(separator: ",").map(String.init) + ["fcm"])
        let paths: [Path] = [
            (
                "fcm",
                { range in
                    let messages = range.map { index in
                        FCMMessage(
                            target: .token("token-\(index)"),
                            data: [
                                ("title", "Hello"), ("body", "A benchmark notification"), ("order", "42"),
                                ("herald_delivery", "\(index)"),
                            ], android: FCMMessage.Android(priority: .high, ttl: .seconds(3600)))
                    }
                    return await fcm.send(messages)
                }
            ),
            (
                "apns",
                { range in
                    let expiration = Date().addingTimeInterval(3600)
                    let notifications = range.map { index in
                        APNsNotification(
                            deviceToken: deviceTokens[index],
                            topic: "com.example.bench", pushType: .alert, priority: 10, expiration: expiration,
                            collapseID: "\(index)", payload: apnsPayload(index))
                    }
                    return await apns.send(notifications)
                }
            ),
            (
                "web",
                { range in
                    let messages = try range.map { index in
                        WebPushMessage(
                            subscription: try WebPushSubscription(
                                endpoint: "\(base)/push/\(index)", p256dh: browserKeys[index],
                                auth: Array(repeating: UInt8(index & 0xFF), count: 16)),
                            payload: document(index), ttl: 3600, topic: "\(index)")
                    }
                    return await web.send(messages)
                }
            ),
        ].filter { wanted.contains($0.name) }

        // One batch each first: connections, the OAuth token, the APNs and VAPID tokens.
        for path in paths { _ = try await path.send(0..<min(batch, count)) }
        var costs: [String: [Double]] = [:]
        for round in 1...rounds {
            var line: [String] = []
            for path in paths {
                let cpu = processCPU()
                let started = ContinuousClock.now
                var sent = 0
                for start in stride(from: 0, to: count, by: batch) {
                    sent += try await path.send(start..<min(start + batch, count)).count {
                        if case .sent = $0 { true } else { false }
                    }
                }
                let seconds = (ContinuousClock.now - started) / .seconds(1)
                let micros = (processCPU() - cpu) / Double(count) * 1e6
                guard sent == count else { throw ValidationError("\(path.name): \(count - sent) not sent") }
                costs[path.name, default: []].append(micros)
                line.append(
                    "\(path.name) \(String(format: "%.1f", micros)) µs (\(String(format: "%.0f", Double(count) / seconds))/s)"
                )
            }
            print("round \(round): " + line.joined(separator: ", "))
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let fcmCosts = costs["fcm"]!
        print(
            "median CPU per delivery: "
                + paths.map { path -> String in
                    let own = costs[path.name]!
                    let difference = median(zip(own, fcmCosts).map { $0 - $1 })
                    return path.name == "fcm"
                        ? "fcm \(String(format: "%.1f", median(own))) µs"
                        : "\(path.name) \(String(format: "%.1f", median(own))) µs (FCM \(String(format: "%+.1f", difference)))"
                }.joined(separator: ", "))
        http.shutdown()
    }
}
