import Foundation
import HeraldEmulator
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct MetricsTests {
    /// Prometheus scrapes a running daemon: sends by outcome, queue depth, claim and send
    /// latency, token refreshes, reports and wake-ups.
    @Test func prometheusSeesWhatTheDaemonDid() async throws {
        let emulator = try await Emulator.start()
        let account = try await emulator.makeServiceAccount(projectID: "shop-prod")
        let file = try ServiceAccountFile(account)
        defer { file.remove() }
        let database = try await TestDatabase.create()
        let db = try await database.connect()
        try await db.addApp("shop", fcmProject: "shop-prod", credentialsFile: file.path)
        try await db.query("SELECT herald.register_device('shop', 'iphone', 'ios', 'token-iphone', 'alice')")
        try await db.query("SELECT herald.register_device('shop', 'pixel', 'android', 'token-pixel', 'alice')")
        await emulator.setBehaviour(.unregistered, forToken: "token-pixel")
        // A Huawei phone, whose receipt Push Kit's stand-in posts to the daemon.
        await emulator.registerHMSApp(clientID: "1234567", secret: "hms-secret")
        let hmsSecret = try SecretFile(contents: "hms-secret", suffix: ".secret")
        let receiptKey = try SecretFile(contents: Data(repeating: 7, count: 32).base64EncodedString(), suffix: ".key")
        try await db.query(
            """
            INSERT INTO herald.app_hms (app_id, client_id, client_secret_file, receipt_username, receipt_key_file)
            VALUES ('shop', '1234567', $1, 'receipts', $2)
            """, [hmsSecret.path, receiptKey.path])
        try await db.query(
            "SELECT herald.register_device('shop', 'mate', 'android', $1, 'alice', 'hms_token')",
            ["ANDmbp0J" + String(repeating: "x", count: 40)])
        try await db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await db.query("INSERT INTO herald.jobs (kind, run_at) VALUES ('later', now() + interval '1 hour')")
        try await db.execute(
            """
            INSERT INTO herald.apps (app_id) VALUES ('broken');
            INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('broken', 'broken-prod');
            INSERT INTO herald.app_config_problems (app_id, scope, problem, since, failed_at)
            VALUES ('broken', 'fcm_apns', '401 THIRD_PARTY_AUTH_ERROR', now(), now());
            """)

        let daemon = try HeraldProcess(
            ["run"],
            environment: [
                "HERALD_DATABASE_URL": database.conninfo, "HERALD_FCM_ENDPOINT": emulator.baseURL,
                "HERALD_PROVIDER_ENDPOINTS": "hms=\(emulator.baseURL)", "HERALD_POLL_INTERVAL": "200ms",
            ])
        #expect(
            try await eventually(timeout: .seconds(20)) {
                try await db.query("SELECT count(*) FROM herald.deliveries WHERE state <> 'queued'")[0].decode(
                    0, as: Int.self) == 3
            }, "\(daemon.output)")
        let appPort = try #require(
            daemon.output.firstMatch(of: /address=127\.0\.0\.1:(\d+) routes=app/).flatMap { Int($0.1) },
            "\(daemon.output)")
        let receipts = await emulator.pushKitReceipts(
            harmony: false, to: "http://127.0.0.1:\(appPort)/v1/receipts/hms/shop", version: .v1,
            username: "receipts", key: Data(repeating: 7, count: 32).base64EncodedString(), at: Date())
        #expect(try await HTTPClient().send(receipts).status == 200)
        let reference = try await db.query(
            "SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries WHERE state = 'sent' ORDER BY id LIMIT 1"
        )[0].decode(
            0, as: String.self)
        _ = try await db.query("SELECT herald.report_delivery($1)", [reference])
        let port = try #require(
            daemon.output.firstMatch(of: /address=127\.0\.0\.1:(\d+) routes=metrics/).flatMap { Int($0.1) },
            "\(daemon.output)")

        var scrape = ""
        // A refusal, counted by why, not by the app it names.
        var forged = receipts
        forged.url = "http://127.0.0.1:\(appPort)/v1/receipts/hms/nobody"
        #expect(try await HTTPClient().send(forged).status == 403)
        _ = try await eventually {
            scrape = try await Self.get("http://127.0.0.1:\(port)/metrics")
            return scrape.contains("herald_reports_applied_total 1")
        }
        for expected in [
            #"herald_sends_total{outcome="sent"} 2"#,
            #"herald_sends_total{outcome="token_invalid"} 1"#,
            // FCM's and Huawei's.
            #"herald_token_refreshes_total{result="ok"} 2"#,
            #"herald_queue_jobs{kind="later",state="scheduled"} 1"#,
            #"herald_queue_jobs{kind="dispatch",state="ready"} 0"#,
            #"herald_claim_duration_seconds_bucket{kind="dispatch",le="+Inf"}"#,
            // One batch or two, as the two dispatch loops happened to claim them.
            #"herald_send_batch_duration_seconds_count "#,
            #"herald_jobs_finished_total{kind="dispatch",outcome="completed"} 3"#,
            "herald_reports_applied_total 1",
            "herald_wakeups_total 0",
            #"herald_receipts_refused_total{provider="hms",reason="not_set_up"} 1"#,
            #"herald_app_config_error{app="broken",scope="fcm_apns"} 1"#,
            #"herald_receipts_total{provider="hms",app="shop",outcome="delivered"} 1"#,
            #"herald_receipt_delay_seconds_bucket{provider="hms",le="+Inf"} 1"#,
        ] {
            #expect(scrape.contains(expected), "missing \(expected) in:\n\(scrape)")
        }
        // The shipped dashboard and alert rules query only metrics a daemon exports.
        let exported = Set(scrape.matches(of: /# TYPE (\w+)/).map { String($0.1) })
        for metric in try MonitoringFilesTests.queriedMetrics() {
            #expect(exported.contains(metric), "deploy/ queries \(metric), which the daemon does not export")
        }
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(60)))
    }

    static func get(_ url: String) async throws -> String {
        try await runProgram("/usr/bin/curl", ["-sf", "--max-time", "10", url]).output
    }
}
