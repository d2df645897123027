import Foundation
import HeraldCore
import HeraldHTTP
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Synchronization
import Testing

@testable import HeraldWorkers

/// "Toy Push", a provider made up for this test and added only through the seam a new provider
/// uses (docs/architecture.md, "Adding a provider"): its rows of the routing tables and its
/// settings table (what its migration would add), and its ``ProviderRoute`` in the registry. Its
/// service takes `POST /send` with a bearer key and a JSON body `{"token", "title", "body"}`, and
/// answers 200 `{"id"}`, 404 for a token it does not know, 401 for a key it refuses.
struct ToyPush: ProviderRoute {
    static let name = "toy"
    static let displayName = "Toy Push"
    static let scopes: [ConfigurationScope] = ["toy"]
    static let payloadKinds: Set<OutgoingDelivery.PayloadKind> = [.androidData]

    static func accepts(_ target: OutgoingDelivery.Target) -> Bool {
        if case .token(kind: "toy_token", _) = target { true } else { false }
    }

    /// The app's row of `herald.app_toy`.
    struct Setup: Equatable, Sendable, Decodable {
        var endpoint: String
        var api_key: String
    }

    let endpoint: String
    let key: String
    let http: HeraldHTTP.HTTPClient

    /// What its migration adds.
    static let migration = """
        CREATE TABLE herald.app_toy (
            app_id   text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
            endpoint text NOT NULL,
            api_key  text NOT NULL
        );
        CREATE TRIGGER app_toy_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_toy
            FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
        GRANT SELECT ON herald.app_toy TO herald_daemon;
        INSERT INTO herald.providers VALUES ('toy', 'herald.app_toy');
        INSERT INTO herald.config_scopes VALUES ('toy', 'deliveries through Toy Push');
        INSERT INTO herald.token_kinds VALUES ('toy_token', '{android}', 'a Toy Push token', '^toy-[a-z]+$',
                                               '"toy-" and lower-case letters');
        INSERT INTO herald.routes VALUES ('toy', 'toy', 'Android through Toy Push', '{toy}');
        INSERT INTO herald.route_targets VALUES ('android_data', 'toy_token', 'toy');
        """

    static func make(app: String, setup: Setup?, shared: isolated Senders) throws(ConfigurationProblem) -> ToyPush {
        guard let setup else { throw ConfigurationProblem("app \(app) has no row in herald.app_toy") }
        return ToyPush(endpoint: setup.endpoint, key: setup.api_key, http: shared.http)
    }

    func send(_ batch: [OutgoingDelivery], builder: PayloadBuilder, now: Date, context: WorkerContext) async
        -> [(OutgoingDelivery, DeliveryLife.Event)]
    {
        let requests = batch.map { delivery in
            let body: [String: String?] = [
                "token": delivery.target?.deviceToken, "title": delivery.notification.title,
                "body": delivery.notification.body,
            ]
            return HeraldHTTP.HTTPRequest(
                url: endpoint + "/send", headers: [("Authorization", "Bearer \(key)")],
                body: Array((try? JSONEncoder().encode(body.compactMapValues { $0 })) ?? Data()))
        }
        let answers = await http.send(requests)
        let at = context.clock.now()
        return zip(batch, answers).map { delivery, answer in
            let outcome: PushOutcome
            switch answer {
            case .success(let response) where response.status == 200:
                let id = (try? JSONDecoder().decode([String: String].self, from: Data(response.body)))?["id"]
                outcome = .sent(messageName: id ?? "")
            case .success(let response) where response.status == 404:
                outcome = .tokenInvalid(reason: "404 unknown token")
            case .success(let response) where response.status == 401:
                outcome = .configurationError(reason: "401 the API key is refused", scope: "toy")
            case .success(let response):
                outcome = .retry(after: nil, reason: "\(response.status)")
            case .failure(let error):
                outcome = .retry(after: nil, reason: "\(error)")
            }
            return (delivery, .sent(outcome, dryRun: delivery.notification.dryRun, at: at))
        }
    }
}

@Suite struct ToyProviderTests {
    /// The toy service: what it received, and the key it takes.
    final class ToyService: Sendable {
        let received = Mutex<[[String: String]]>([])
        let key = Mutex("toy-key")
        let knownTokens: Set<String> = ["toy-alive"]
    }

    @Test func aProviderAddedThroughTheSeamSendsEndToEnd() async throws {
        let service = ToyService()
        let server = try await LocalServer.start { request in
            guard request.header("authorization") == "Bearer \(service.key.withLock { $0 })" else {
                return LocalServer.Response(status: 401)
            }
            let body = try JSONDecoder().decode([String: String].self, from: request.body)
            service.received.withLock { $0.append(body) }
            guard let token = body["token"], service.knownTokens.contains(token) else {
                return LocalServer.Response(status: 404)
            }
            return LocalServer.Response(status: 200, body: Data(#"{"id":"toy-\#(token)"}"#.utf8))
        }
        let f = try await WorkerFixture.make()
        try await f.db.execute(ToyPush.migration)
        try await f.db.query(
            "INSERT INTO herald.app_toy VALUES ('shop', $1, 'toy-key')", [server.url("")])
        var senders = Senders.Configuration()
        senders.endpoints["fcm"] = f.emulator.baseURL
        senders.providers = Providers.compiledIn + [ToyPush.self]
        var context = f.context
        context.senders = Senders(http: HeraldHTTP.HTTPClient(), configuration: senders, logger: context.logger)
        let dispatch = DispatchWorker(context: context)

        // Ingest fans out to every kind of device alike, and each goes by its route.
        try await f.register("pixel", "android")
        for (device, token) in [("toy-phone", "toy-alive"), ("old-toy-phone", "toy-gone")] {
            try await f.db.query(
                "SELECT herald.register_device('shop', $1, 'android', $2, 'alice', 'toy_token')", [device, token])
        }
        // Registration holds producers to how its token kind says its tokens look.
        let refused = await #expect(throws: PostgresError.self) {
            try await f.db.query(
                "SELECT herald.register_device('shop', 'bad-toy-phone', 'android', 'TOY 7', 'alice', 'toy_token')")
        }
        #expect(
            refused?.message.contains(
                #"a Toy Push token is "toy-" and lower-case letters, not 5 characters like 'TOY 7…'"#) == true,
            "\(refused?.message ?? "")")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42')")
        try await f.ingest()
        try await dispatch.drain()

        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(await f.message(to: "token-pixel") != nil, "FCM's went to FCM")
        let sent = try await f.delivery(of: "toy-phone")
        #expect(sent.state == "sent" && sent.name == "toy-toy-alive", "\(sent)")
        #expect(service.received.withLock { $0 }.contains { $0["token"] == "toy-alive" && $0["title"] == "Shipped" })
        // A dead token disables its device alone, named by the provider, as operators see it.
        #expect(try await f.delivery(of: "old-toy-phone").state == "token_invalid")
        let disabled = try await f.db.query(
            "SELECT device_id, disabled_cause, disabled_reason, token_hint FROM herald.disabled_devices")
        #expect(disabled.count == 1)
        #expect(try disabled[0].decode("device_id", as: String.self) == "old-toy-phone")
        #expect(try disabled[0].decode("disabled_reason", as: String.self) == "Toy Push: 404 unknown token")
        #expect(try disabled[0].decode("token_hint", as: String.self) == "toy-gone…")

        // The service now refuses the key: the app's Toy Push waits as a configuration problem of
        // its own scope, while its FCM goes on.
        service.key.withLock { $0 = "rotated" }
        try await f.register("tablet", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Out for delivery')")
        try await f.ingest()
        try await dispatch.drain()
        #expect(try await f.delivery(of: "tablet").state == "sent")
        let waiting = try await f.delivery(of: "toy-phone")
        #expect(waiting.state == "queued" && waiting.error?.contains("401") == true, "\(waiting)")
        let problem = try await f.db.query("SELECT scope, waiting, config_error FROM herald.app_problems")
        #expect(problem.count == 1)
        #expect(try problem[0].decode("scope", as: String.self) == "toy")
        #expect(try problem[0].decode("waiting", as: String.self) == "deliveries through Toy Push")

        // The retry worker's rules read the same routes: a problem idle for five minutes is kept
        // while a delivery of a route that needs it waits.
        try await f.db.query("UPDATE herald.app_config_problems SET failed_at = now() - interval '10 minutes'")
        _ = try await RetryWorker(context: context).runBatch(limit: 10) { false }
        #expect(try await f.db.query("SELECT 1 FROM herald.app_config_problems").count == 1)

        // The operator fixes the key in the provider's own table; the next probe reads it.
        try await f.db.query("UPDATE herald.app_toy SET api_key = 'rotated'")
        try await f.db.query("UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued'")
        try await dispatch.drain()
        #expect(try await f.delivery(of: "toy-phone").state == "sent")

        // Once nothing waits on it, the problem is cleared (by the probe's answer, or, when that
        // came too late to be recorded with the claim, by the retry worker once it is idle).
        try await f.db.query("UPDATE herald.app_config_problems SET failed_at = now() - interval '10 minutes'")
        _ = try await RetryWorker(context: context).runBatch(limit: 10) { false }
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty)
    }
}
