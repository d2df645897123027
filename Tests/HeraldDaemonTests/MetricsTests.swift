import Foundation
import HeraldEmulator
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
                "HERALD_POLL_INTERVAL": "200ms",
            ])
        #expect(
            try await eventually(timeout: .seconds(20)) {
                try await db.query("SELECT count(*) FROM herald.deliveries WHERE state <> 'queued'")[0].decode(
                    0, as: Int.self) == 2
            }, "\(daemon.output)")
        let reference = try await db.query(
            "SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries WHERE state = 'sent'")[0].decode(
                0, as: String.self)
        _ = try await db.query("SELECT herald.report_delivery($1)", [reference])
        let port = try #require(
            daemon.output.firstMatch(of: /address=127\.0\.0\.1:(\d+) routes=metrics/).flatMap { Int($0.1) },
            "\(daemon.output)")

        var scrape = ""
        _ = try await eventually {
            scrape = try await Self.get("http://127.0.0.1:\(port)/metrics")
            return scrape.contains("herald_reports_applied_total 1")
        }
        for expected in [
            #"herald_sends_total{outcome="sent"} 1"#,
            #"herald_sends_total{outcome="token_invalid"} 1"#,
            #"herald_token_refreshes_total{result="ok"} 1"#,
            #"herald_queue_jobs{kind="later",state="scheduled"} 1"#,
            #"herald_queue_jobs{kind="dispatch",state="ready"} 0"#,
            #"herald_claim_duration_seconds_bucket{kind="dispatch",le="+Inf"}"#,
            // One batch or two, as the two dispatch loops happened to claim them.
            #"herald_send_batch_duration_seconds_count "#,
            #"herald_jobs_finished_total{kind="dispatch",outcome="completed"} 2"#,
            "herald_reports_applied_total 1",
            "herald_wakeups_total 0",
            #"herald_app_config_error{app="broken",scope="fcm_apns"} 1"#,
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
