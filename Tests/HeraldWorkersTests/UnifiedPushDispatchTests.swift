import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Android phones without Google's services, through the UnifiedPush distributor their user
/// chose: the emulator's push service behind nginx (TLS, HTTP/2) stands in for it, checks the
/// VAPID authorization and decrypts each message as the connector library would.
@Suite struct UnifiedPushDispatchTests {
    /// The fixture's app `shop` accepting distributors on any host (`hosts`), and on this
    /// machine's addresses (the stand-in's), with the fixture's VAPID key.
    func unifiedPushApp(_ f: WorkerFixture, hosts: String = "{*}") async throws {
        try await f.db.query(
            """
            INSERT INTO herald.app_unifiedpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
            VALUES ('shop', $1, 'mailto:push@shop.example', $2::text[], true)
            """, [try #require(f.vapid).path, hosts])
    }

    /// Registers a phone with the endpoint and keys its distributor gave the connector, as the
    /// app's backend passes them on; returns the endpoint. `host`: the distributor's name
    /// (`localhost` is another origin than the address, through the same front).
    @discardableResult
    func registerPhone(_ f: WorkerFixture, _ device: String, user: String = "alice", host: String? = nil)
        async throws -> String
    {
        let front = try #require(f.pushService)
        let base = host.map { front.baseURL.replacingOccurrences(of: "127.0.0.1", with: $0) } ?? front.baseURL
        let subscription = try await f.emulator.subscribe(
            base: base, applicationServerKey: try #require(f.vapid).publicKey)
        try await f.db.query(
            "SELECT herald.register_device('shop', $1, 'android', $2, $3, 'unifiedpush')",
            [device, subscription.json, user])
        return subscription.endpoint
    }

    /// A distributor is a server anyone can run: each attack of `HostileHTTP2Server` behind a
    /// phone's endpoint leaves that phone's delivery waiting for its retry, with the reason in
    /// words, and the user's other phones (a healthy distributor, FCM) get theirs in the same
    /// pass. (The window that never opens is left to `HostileServerTests`: the first request on
    /// a connection is answered before the server's SETTINGS shut it.)
    @Test func aHostileDistributorFailsOnlyItsOwnPhone() async throws {
        var servers: [HostileHTTP2Server] = []
        for attack in HostileHTTP2Server.Attack.allCases where attack != .windowNeverOpens {
            servers.append(try await HostileHTTP2Server.start(attack))
        }
        let f = try await WorkerFixture.make(webPush: true, alsoTrusting: [servers[0].caBundle])
        try await unifiedPushApp(f)
        try await registerPhone(f, "fairphone")
        try await f.register("pixel", "android")
        for server in servers {
            // A subscription's keys, at the hostile server's address.
            let subscription = try await f.emulator.subscribe(
                base: try #require(f.pushService).baseURL, applicationServerKey: try #require(f.vapid).publicKey)
            let json = subscription.json.replacingOccurrences(
                of: try #require(f.pushService).baseURL, with: server.baseURL)
            try await f.db.query(
                "SELECT herald.register_device('shop', $1, 'android', $2, 'alice', 'unifiedpush')",
                [server.attack.rawValue, json])
        }
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped')")
        try await f.ingest()
        try await f.dispatch()

        #expect(try await f.delivery(of: "fairphone").state == "sent")
        #expect(try await f.delivery(of: "pixel").state == "sent")
        for server in servers {
            let delivery = try await f.delivery(of: server.attack.rawValue)
            #expect(delivery.state == "queued", "\(server.attack): \(delivery)")
            // A handshake never answered ends at the request's timeout, waiting for a connection.
            let (opening, reason) =
                switch server.attack {
                case .handshakeNeverCompletes: ("push service did not answer in time: ", "waited for a connection")
                case _ where server.attack.breaksTheRules: ("push service misbehaved: ", server.attack.reason)
                default: ("push service unreachable: ", server.attack.reason)
                }
            #expect(
                delivery.error?.hasPrefix(opening) == true && delivery.error?.contains(reason) == true,
                "\(server.attack): \(delivery)")
        }
        for server in servers { await server.stop() }
    }

    @Test func aPhoneGetsTheAndroidDataDocumentFromItsDistributor() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        let endpoint = try await registerPhone(f, "fairphone")
        try await f.register("pixel", "android")
        try await f.db.query(
            """
            SELECT herald.send('shop', user_ref => 'alice', title => 'Shipped', body => 'Parcel 42',
                               data => '{"order": "42"}', priority => 'normal', ttl => interval '2 hours',
                               android_channel_id => 'orders')
            """)
        try await f.ingest()
        try await f.dispatch()

        let sent = try await f.delivery(of: "fairphone")
        #expect(sent.state == "sent", "\(sent)")
        #expect(try await f.delivery(of: "pixel").state == "sent", "the app's other phones go through FCM")
        let push = try #require(await f.emulator.webPushes.first)
        #expect(push.endpoint == endpoint && push.urgency == "normal" && (7100...7200).contains(push.ttl))
        // What the connector hands the app: the document an Android app reads from FCM's data.
        let document = push.document
        #expect(document["title"] as? String == "Shipped" && document["body"] as? String == "Parcel 42")
        #expect(document["order"] as? String == "42" && document["channel_id"] as? String == "orders")
        let reference = try #require(document["herald_report"] as? String)
        let opened = try await f.db.query("SELECT delivery_id FROM herald.open_reference($1)", [reference])[0]
        #expect(try opened.decode(0, as: Int64?.self) != nil)
    }

    /// A distributor takes Web Push, whose 4096 bytes of ciphertext hold 3993 of the document:
    /// a notification larger than that fails at ingest for the UnifiedPush phone alone, with the
    /// reason, and goes to the user's phone through FCM.
    @Test func aPayloadTooLargeForWebPushFailsOnlyTheUnifiedPushPhone() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        try await registerPhone(f, "fairphone")
        try await f.register("pixel", "android")
        _ = try await f.db.query(
            "SELECT herald.send('shop', user_ref => 'alice', title => 'Long', body => repeat('x', 3860))")
        try await f.ingest()
        let phone = try await f.delivery(of: "fairphone")
        #expect(phone.state == "failed")
        #expect(phone.error?.contains("over Web Push's 3993 bytes of plaintext") == true, "\(phone)")
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        #expect(await f.emulator.webPushRequests == 0)
    }

    /// An app takes no UnifiedPush endpoint until it has a policy, and then only on the hosts it
    /// lists; metadata and private addresses stay refused unless it allows them.
    @Test func registrationFollowsTheAppsDistributorPolicy() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        let keys =
            #"{"p256dh": "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "auth": "BTBZMqHH6r4Tts7J_aSIgg"}"#
        func register(_ endpoint: String) async throws {
            try await f.db.query(
                "SELECT herald.register_device('shop', 'phone', 'android', $1, 'alice', 'unifiedpush')",
                [#"{"endpoint": "\#(endpoint)", "keys": \#(keys)}"#])
        }
        await #expect { try await register("https://ntfy.example.net/upAbc123") } throws: {
            "\($0)".contains(
                "takes no token of kind unifiedpush (a UnifiedPush endpoint with its keys) until it has a row in herald.app_unifiedpush"
            )
        }
        try await f.db.query(
            """
            INSERT INTO herald.app_unifiedpush (app_id, vapid_key_file, vapid_subject)
            VALUES ('shop', $1, 'mailto:push@shop.example')
            """, [try #require(f.vapid).path])
        try await register("https://ntfy.example.net/upAbc123")
        for (endpoint, refusal) in [
            ("https://169.254.169.254/latest/meta-data", "is a loopback, private or link-local address"),
            ("https://10.0.0.7/up", "is a loopback, private or link-local address"),
            ("http://ntfy.example.net/up", "must be an https:// URL"),
        ] {
            await #expect { try await register(endpoint) } throws: { "\($0)".contains(refusal) }
        }
        try await f.db.query("UPDATE herald.app_unifiedpush SET hosts = '{ntfy.example.net}'")
        await #expect { try await register("https://push.other.example/up") } throws: {
            "\($0)".contains("is not a push service app 'shop' sends to")
        }
        let stored = try await f.db.query("SELECT platform, token_kind, push_token FROM herald.devices")[0]
        #expect(try stored.decode(1, as: String.self) == "unifiedpush")
        #expect(try stored.decode(2, as: String.self) == "https://ntfy.example.net/upAbc123")
    }

    /// An endpoint its distributor no longer knows (404) disables that phone alone: the app's
    /// other UnifiedPush and FCM phones are sent.
    @Test func anEndpointItsDistributorForgotDisablesThatPhoneAlone() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        let stuck = try await registerPhone(f, "fairphone")
        try await registerPhone(f, "pinephone", user: "bob")
        try await f.register("pixel", "android", user: "bob")
        await f.emulator.setBehaviour(.unregistered, forToken: stuck)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.dispatch()
        let gone = try await f.delivery(of: "fairphone")
        #expect(gone.state == "token_invalid" && gone.error?.contains("404") == true, "\(gone)")
        #expect(try await f.delivery(of: "pinephone").state == "sent")
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let disabled = try await f.db.query("SELECT device_id FROM herald.devices WHERE disabled_at IS NOT NULL")
        #expect(try disabled.map { try $0.decode(0, as: String.self) } == ["fairphone"])
    }

    /// A slow distributor holds back only its own phones: another distributor's phone is sent
    /// without waiting for it.
    @Test func aSlowDistributorHoldsBackOnlyItsOwnPhones() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        let slow = try await registerPhone(f, "fairphone", host: "localhost")
        try await registerPhone(f, "pinephone", user: "bob")
        await f.emulator.setBehaviour(.slow(milliseconds: 4000), forToken: slow)
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'bob', title => 'y')")
        try await f.ingest()
        try await f.dispatch()
        let times = try await f.db.query(
            """
            SELECT dev.device_id, d.state, extract(epoch FROM d.sent_at)::float8 FROM herald.deliveries d
            JOIN herald.devices dev ON dev.id = d.device_id ORDER BY dev.device_id
            """
        ).map {
            (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self), try $0.decode(2, as: Double?.self))
        }
        #expect(times.map(\.1) == ["sent", "sent"], "\(times)")
        let fast = try #require(times.first { $0.0 == "pinephone" }?.2)
        let late = try #require(times.first { $0.0 == "fairphone" }?.2)
        #expect(late - fast > 3, "the other distributor's phone did not wait: \(times)")
    }

    /// Off unless the daemon's HERALD_UNIFIEDPUSH is on: the deliveries wait, saying so, and
    /// spend no attempt; the app's other phones are sent.
    @Test func offByDefaultItsDeliveriesWaitSayingWhy() async throws {
        let f = try await WorkerFixture.make(webPush: true, unifiedPush: false)
        try await unifiedPushApp(f)
        try await registerPhone(f, "fairphone")
        try await f.register("pixel", "android")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "pixel").state == "sent")
        let waiting = try await f.delivery(of: "fairphone")
        #expect(waiting.state == "queued", "\(waiting)")
        #expect(
            waiting.error
                == "waiting: UnifiedPush is off in the daemon that claimed it; a daemon with HERALD_UNIFIEDPUSH=true will send it"
        )
        #expect(await f.emulator.webPushes.isEmpty)
        let attempts = try await f.db.query(
            "SELECT d.attempts FROM herald.deliveries d JOIN herald.devices v ON v.id = d.device_id WHERE v.device_id = 'fairphone'"
        )[0].decode(0, as: Int.self)
        #expect(attempts == 0, "waiting is not an attempt")
    }

    /// The address the daemon connects to is checked again: an endpoint registered while the
    /// app allowed private addresses is not sent to once it no longer does.
    @Test func aPrivateAddressIsRefusedAtConnectTime() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        try await registerPhone(f, "fairphone")
        try await f.db.query("UPDATE herald.app_unifiedpush SET private_addresses = false")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'x')")
        try await f.ingest()
        try await f.dispatch()
        let refused = try await f.delivery(of: "fairphone")
        #expect(refused.state == "failed", "\(refused)")
        #expect(refused.error?.contains("herald.app_unifiedpush.private_addresses") == true, "\(refused)")
        #expect(await f.emulator.webPushes.isEmpty)
    }

    /// A distributor refusing the app's VAPID signature is one user's server: refusals from one
    /// distributor never make it the app's configuration; from two, with none accepted, they do
    /// (scope `unifiedpush`, not browsers').
    @Test func onlyTwoDistributorsRefusingTheKeyMakeItTheAppsProblem() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        try await unifiedPushApp(f)
        for (device, user) in [("fairphone", "alice"), ("pinephone", "bob")] {
            await f.emulator.setBehaviour(
                .thirdPartyAuthError, forToken: try await registerPhone(f, device, user: user))
        }
        try await f.db.query(
            "SELECT herald.send('shop', user_ref => u, title => 'x') FROM unnest('{alice,bob}'::text[]) u")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.db.query("SELECT 1 FROM herald.app_problems").isEmpty, "one distributor's word")
        #expect(try await f.delivery(of: "fairphone").state == "queued")

        await f.emulator.setBehaviour(
            .thirdPartyAuthError, forToken: try await registerPhone(f, "librem", user: "carol", host: "localhost"))
        try await f.db.query("SELECT herald.send('shop', user_ref => 'carol', title => 'y')")
        try await f.ingest()
        try await f.dispatch()
        let scopes = try await f.db.query("SELECT scope FROM herald.app_problems").map {
            try $0.decode(0, as: String.self)
        }
        #expect(scopes == ["unifiedpush"])
    }
}
