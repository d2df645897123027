import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// Live Activities: the producer's three calls, the app's tokens, ordering and supersession, what
/// each token and send came to; against a real database and the emulator's APNs (behind nginx)
/// and FCM, which check what Apple and Google check of a Live Activity push.
@Suite struct LiveActivityTests {
    static let type = "DeliveryAttributes"

    /// A hex token for a Live Activity (64 digits), distinct per name.
    static func token(_ name: String) -> String {
        WorkerFixture.apnsToken("la-" + name)
    }

    /// alice's two iPhones: one with an APNs device token (straight to APNs), one with an FCM
    /// registration token; each with a push-to-start token for `type`.
    static func twoIPhones() async throws -> WorkerFixture {
        let f = try await WorkerFixture.make(apns: true)
        try await f.registerIPhone("iphone-apns")
        _ = try await f.db.query(
            "SELECT herald.register_device('shop', 'iphone-fcm', 'ios', 'token-iphone-fcm', 'alice', 'registration_token')"
        )
        for device in ["iphone-apns", "iphone-fcm"] {
            let status = try await f.db.query(
                "SELECT status FROM herald.register_activity_token('shop', $1, $2, $3)",
                [device, token("start-" + device), type])[0].decode(0, as: String.self)
            #expect(status == "registered")
        }
        return f
    }

    func start(_ f: WorkerFixture, _ activity: String = "order-42") async throws -> Int64 {
        try await f.db.query(
            """
            SELECT herald.start_activity('shop', $1, $2, '{"orderNumber": 42}', '{"status": "preparing", "eta": 20}',
                                         'Order 42', body => 'Preparing your order', user_ref => 'alice')
            """, [activity, Self.type])[0].decode(0, as: Int64.self)
    }

    func update(_ f: WorkerFixture, _ status: String, _ extra: String = "", activity: String = "order-42")
        async throws -> Int64
    {
        try await f.db.query(
            "SELECT herald.update_activity('shop', $1, jsonb_build_object('status', $2::text)\(extra))",
            [activity, status])[0].decode(0, as: Int64.self)
    }

    func registerUpdateToken(_ f: WorkerFixture, _ device: String, activity: String = "order-42") async throws {
        _ = try await f.db.query(
            "SELECT herald.register_activity_token('shop', $1, $2, $3, $4)",
            [device, Self.token("update-" + device + activity), Self.type, activity])
    }

    func notification(_ f: WorkerFixture, _ id: Int64) async throws -> (state: String, reason: String?) {
        let row = try await f.db.query("SELECT state, reason FROM herald.notifications WHERE id = $1", [id])[0]
        return (try row.decode(0), try row.decode(1, as: String?.self))
    }

    func deliveries(_ f: WorkerFixture, _ id: Int64) async throws -> [(state: String, error: String?)] {
        try await f.db.query(
            "SELECT state, last_error FROM herald.deliveries WHERE notification_id = $1 ORDER BY id", [id]
        ).map { (try $0.decode(0), try $0.decode(1, as: String?.self)) }
    }

    /// The Live Activity pushes APNs received for a token, oldest first.
    func pushes(_ f: WorkerFixture, to token: String) async -> [ReceivedAPNsNotification] {
        await f.emulator.apnsReceived.filter { $0.deviceToken == token }
    }

    /// The `apns` block of the FCM messages for the iPhone on FCM whose Live Activity token is
    /// `token`, oldest first.
    func fcmPushes(_ f: WorkerFixture, to token: String) async -> [[String: Any]] {
        await f.messages(to: "token-iphone-fcm").compactMap { $0["apns"] as? [String: Any] }
            .filter { $0["live_activity_token"] as? String == token }
    }

    static func aps(_ apns: [String: Any]) -> [String: Any] {
        (apns["payload"] as? [String: Any])?["aps"] as? [String: Any] ?? [:]
    }

    @Test func anActivitysWholeLifeOnTwoIPhonesOneStraightToAPNsOneThroughFCM() async throws {
        let f = try await Self.twoIPhones()
        let started = try await start(f)
        try await f.ingest()
        try await f.dispatch()
        #expect(try await notification(f, started).state == "accepted")
        #expect(try await deliveries(f, started).map(\.state) == ["sent", "sent"])

        // Straight to APNs: the Live Activity topic and push type, token authentication.
        let direct = try #require(await pushes(f, to: Self.token("start-iphone-apns")).first)
        #expect(direct.headers["apns-push-type"] == "liveactivity")
        #expect(direct.headers["apns-topic"] == WorkerFixture.bundleID + ".push-type.liveactivity")
        #expect(direct.headers["apns-priority"] == "10", "a start announces itself")
        #expect(direct.headers["apns-collapse-id"] == nil)
        #expect(direct.authentication == "token")
        #expect(direct.aps["event"] as? String == "start")
        #expect(direct.aps["attributes-type"] as? String == Self.type)
        let attributes = try #require(direct.aps["attributes"] as? [String: Any])
        #expect(attributes["orderNumber"] as? Int == 42)
        #expect(attributes["herald_activity"] as? String == "order-42", "the app learns the activity's id")
        #expect((direct.aps["content-state"] as? [String: Any])?["status"] as? String == "preparing")
        #expect((direct.aps["alert"] as? [String: String]) == ["title": "Order 42", "body": "Preparing your order"])
        let timestamp = try #require(direct.aps["timestamp"] as? Int)
        #expect(abs(timestamp - Int(Date().timeIntervalSince1970)) < 60, "seconds, not milliseconds")
        #expect(direct.document.keys.sorted() == ["aps"])
        #expect(direct.shownByDevice)

        // Through FCM: the device's registration token, the activity's token beside it.
        let throughFCM = try #require(await fcmPushes(f, to: Self.token("start-iphone-fcm")).first)
        #expect((throughFCM["headers"] as? [String: String])?["apns-push-type"] == "liveactivity")
        #expect(Self.aps(throughFCM)["event"] as? String == "start")

        // Each iPhone's new activity registers its update token; updates go to both, at
        // priority 5 unless urgent.
        try await registerUpdateToken(f, "iphone-apns")
        try await registerUpdateToken(f, "iphone-fcm")
        let updated = try await update(f, "on its way", ", title => 'On its way', urgent => true")
        try await f.ingest()
        try await f.dispatch()
        let quiet = try await update(f, "around the corner")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await deliveries(f, updated).map(\.state) == ["sent", "sent"])
        #expect(try await deliveries(f, quiet).map(\.state) == ["sent", "sent"])
        let updates = await pushes(f, to: Self.token("update-iphone-apnsorder-42"))
        #expect(updates.map { $0.aps["event"] as? String } == ["update", "update"])
        #expect(updates.map { $0.headers["apns-priority"] } == ["10", "5"])
        #expect(updates.allSatisfy { $0.shownByDevice })
        #expect(updates[0].aps["attributes"] == nil, "only a start carries attributes")
        #expect(await fcmPushes(f, to: Self.token("update-iphone-fcmorder-42")).count == 2)

        // The end: without a content state, the newest; the update tokens end with it.
        let ended = try await f.db.query(
            "SELECT herald.end_activity('shop', 'order-42', dismiss_at => now() + interval '1 hour')")[0].decode(
                0, as: Int64.self)
        try await f.ingest()
        try await f.dispatch()
        #expect(try await deliveries(f, ended).map(\.state) == ["sent", "sent"])
        let end = try #require(await pushes(f, to: Self.token("update-iphone-apnsorder-42")).last)
        #expect(end.aps["event"] as? String == "end")
        #expect((end.aps["content-state"] as? [String: Any])?["status"] as? String == "around the corner")
        #expect(end.aps["dismissal-date"] is Int)
        let tokens = try await f.db.query(
            "SELECT kind, ended_cause FROM herald.activity_tokens ORDER BY id"
        ).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: String?.self)) }
        #expect(tokens.map(\.0) == ["push_to_start", "push_to_start", "update", "update"])
        #expect(tokens.map(\.1) == [nil, nil, "activity_ended", "activity_ended"])

        // Nothing more goes to an ended activity.
        let late = try await update(f, "delivered")
        try await f.ingest()
        #expect(try await notification(f, late).state == "rejected")
        #expect(try await notification(f, late).reason?.contains("ended at") == true)

        // Operators read its whole life in one view.
        let life = try await f.db.query(
            """
            SELECT event, notification_state, delivery_state, device_id, token_kind
            FROM herald.live_activity_sends WHERE app_id = 'shop' AND activity_id = 'order-42'
            ORDER BY notification_id, device_id
            """
        ).map {
            try
                "\($0.decode(0, as: String.self)) \($0.decode(1, as: String.self)) \($0.decode(2, as: String?.self) ?? "-") \($0.decode(3, as: String?.self) ?? "-") \($0.decode(4, as: String?.self) ?? "-")"
        }
        #expect(
            life == [
                "start accepted sent iphone-apns push_to_start", "start accepted sent iphone-fcm push_to_start",
                "update accepted sent iphone-apns update", "update accepted sent iphone-fcm update",
                "update accepted sent iphone-apns update", "update accepted sent iphone-fcm update",
                "end accepted sent iphone-apns update", "end accepted sent iphone-fcm update",
                "update rejected - - -",
            ])
        let activity = try await f.db.query(
            "SELECT state, started_by, content_state ->> 'status' FROM herald.live_activities")[0]
        #expect(try activity.decode(0, as: String.self) == "ended")
        #expect(try activity.decode(1, as: String.self) == "producer")
        #expect(try activity.decode(2, as: String.self) == "around the corner")
    }

    @Test func anOlderUpdateArrivingLateIsDroppedNotSent() async throws {
        let f = try await Self.twoIPhones()
        _ = try await start(f)
        try await f.ingest()
        try await registerUpdateToken(f, "iphone-apns")
        // Both after the start (the time of its call), the older written last.
        let newer = try await update(f, "newer", ", event_at => now() + interval '20 seconds'")
        let older = try await update(f, "older", ", event_at => now() + interval '10 seconds'")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await notification(f, newer).state == "accepted")
        let dropped = try await notification(f, older)
        #expect(dropped.state == "superseded")
        #expect(dropped.reason?.contains("newer event") == true, "\(dropped)")
        #expect(try await deliveries(f, older).isEmpty)
        let sent = await pushes(f, to: Self.token("update-iphone-apnsorder-42"))
        #expect(sent.map { ($0.aps["content-state"] as? [String: Any])?["status"] as? String } == ["newer"])
    }

    @Test func aNewerUpdateSupersedesAnOlderOneWaitingForItsRetryOrInFlight() async throws {
        let f = try await Self.twoIPhones()
        _ = try await start(f)
        try await f.ingest()
        try await registerUpdateToken(f, "iphone-apns")
        let token = Self.token("update-iphone-apnsorder-42")

        // The first update meets a 503 and waits for its retry; a newer one cancels it.
        await f.emulator.setBehaviour(.unavailable(retryAfter: nil), forToken: token, times: 1)
        let first = try await update(f, "first")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await deliveries(f, first).map(\.state) == ["queued"])
        let second = try await update(f, "second")
        try await f.ingest()
        let cancelled = try await deliveries(f, first)
        #expect(cancelled.map(\.state) == ["cancelled"])
        #expect(cancelled[0].error?.contains("superseded by notification \(second)") == true, "\(cancelled)")

        // One a worker held when the newer one came is left to it; when its lease runs out,
        // the next claim cancels it, and the newer one goes out.
        try await f.dispatch()
        let held = try await update(f, "held")
        try await f.ingest()
        try await f.db.query(
            """
            UPDATE herald.deliveries SET locked_by = 'another-worker', run_at = now() + interval '1 minute'
            WHERE notification_id = $1
            """, [held])
        let fourth = try await update(f, "fourth")
        try await f.ingest()
        #expect(try await deliveries(f, held).map(\.state) == ["queued"], "a worker holds it")
        try await f.db.query(
            "UPDATE herald.deliveries SET run_at = now() - interval '1 second' WHERE notification_id = $1", [held])
        try await f.dispatch()
        let superseded = try await deliveries(f, held)
        #expect(superseded.map(\.state) == ["cancelled"])
        #expect(superseded[0].error?.contains("superseded by delivery") == true, "\(superseded)")
        #expect(try await deliveries(f, fourth).map(\.state) == ["sent"])
        let sent = await pushes(f, to: token).map { ($0.aps["content-state"] as? [String: Any])?["status"] as? String }
        #expect(sent == ["second", "fourth"], "neither the superseded first nor the held one went out")
    }

    @Test func aTokenRegisteredAfterUpdatesCatchesUpWithTheNewest() async throws {
        let f = try await Self.twoIPhones()
        _ = try await start(f)
        try await f.ingest()
        try await f.dispatch()
        // Two updates before the started activity's token reaches the backend.
        _ = try await update(f, "cooking")
        let newest = try await update(f, "ready")
        try await f.ingest()
        let waiting = try await notification(f, newest)
        #expect(waiting.state == "no_devices")
        #expect(waiting.reason?.contains("no update token yet") == true, "\(waiting)")

        try await registerUpdateToken(f, "iphone-apns")
        #expect(try await notification(f, newest).state == "accepted")
        try await f.dispatch()
        let sent = await pushes(f, to: Self.token("update-iphone-apnsorder-42"))
        #expect(sent.map { ($0.aps["content-state"] as? [String: Any])?["status"] as? String } == ["ready"])

        // The same token registered again changes nothing and sends nothing more.
        try await registerUpdateToken(f, "iphone-apns")
        try await f.dispatch()
        #expect(await pushes(f, to: Self.token("update-iphone-apnsorder-42")).count == 1)
    }

    @Test func anActivityTheAppStartedItselfIsUpdatedAndADeadTokenEndsAlone() async throws {
        let f = try await Self.twoIPhones()
        // No start from the backend: the app started it and registered its token.
        try await registerUpdateToken(f, "iphone-apns", activity: "ride-7")
        let started = try await f.db.query(
            "SELECT started_by, user_ref FROM herald.live_activities WHERE activity_id = 'ride-7'")[0]
        #expect(try started.decode(0, as: String.self) == "app")
        #expect(try started.decode(1, as: String?.self) == "alice")

        let token = Self.token("update-iphone-apnsride-7")
        await f.emulator.setBehaviour(.unregistered, forToken: token, times: 1)
        let first = try await update(f, "arriving", activity: "ride-7")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await deliveries(f, first).map(\.state) == ["token_invalid"])
        let ended = try await f.db.query(
            "SELECT ended_cause, ended_reason FROM herald.activity_tokens WHERE token = $1", [token])[0]
        #expect(try ended.decode(0, as: String?.self) == "token_invalid")
        #expect(try ended.decode(1, as: String?.self)?.contains("APNs") == true)
        let device = try await f.db.query("SELECT disabled_at FROM herald.devices WHERE device_id = 'iphone-apns'")[0]
        #expect(try device.decode(0, as: Date?.self) == nil, "the device's own token may be alive")
        let second = try await update(f, "arrived", activity: "ride-7")
        try await f.ingest()
        #expect(try await notification(f, second).state == "no_devices")
    }

    @Test func anAppOnACertificateIsRefusedLiveActivitiesWithTheReason() async throws {
        let certificate = try await WorkerFixture.pushCertificate(days: 20)
        defer { withExtendedLifetime(certificate) {} }
        let f = try await WorkerFixture.make(apnsCertificate: certificate)
        try await f.registerIPhone("iphone")
        _ = try await f.db.query(
            "SELECT herald.register_activity_token('shop', 'iphone', $1, $2)", [Self.token("start"), Self.type])
        let started = try await start(f)
        try await f.ingest()
        try await f.dispatch()
        let delivery = try await deliveries(f, started)
        #expect(delivery.map(\.state) == ["failed"], "\(delivery)")
        #expect(delivery[0].error?.contains("token-based authentication") == true, "\(delivery)")
        #expect(await f.emulator.apnsReceived.isEmpty)
    }

    @Test(arguments: [
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '{}', '{}', '', user_ref => 'alice')",
            "start needs a title"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '[]', '{}', 'T', user_ref => 'alice')",
            "attributes must be a JSON object"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'Delivery Attributes!', '{}', '{}', 'T', user_ref => 'alice')",
            "attributes_type must name"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '{}', '\"x\"', 'T', user_ref => 'alice')",
            "content_state must be a JSON object"
        ),
        (
            "SELECT herald.start_activity('shop', E'a\\n1', 'DeliveryAttributes', '{}', '{}', 'T', user_ref => 'alice')",
            "activity_id must be 1 to 256 bytes"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '{}', '{}', 'T', user_ref => 'alice', event_at => now() + interval '1 hour')",
            "ahead of the database's clock"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '{}', '{}', 'T', user_ref => 'alice', stale_at => 'infinity')",
            "must be finite times"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', jsonb_build_object('x', repeat('x', 5000)), '{}', 'T', user_ref => 'alice')",
            "over APNs' 4096"
        ),
        (
            "SELECT herald.start_activity('shop', 'a1', 'DeliveryAttributes', '{}', '{}', 'T', user_ref => 'alice', relevance_score => 'NaN')",
            "relevance_score must be a finite number"
        ),
        ("SELECT herald.update_activity('shop', 'nobody-started-it', '{}')", "unknown activity 'nobody-started-it'"),
        (
            "SELECT herald.end_activity('shop', 'nobody-started-it', dismiss_at => now() + interval '5 hours')",
            "unknown activity"
        ),
    ])
    func ingestRejectsAnEventItCannotSendWithTheReason(call: String, reason: String) async throws {
        let f = try await Self.twoIPhones()
        let id = try await f.db.query(call)[0].decode(0, as: Int64.self)
        try await f.ingest()
        let verdict = try await notification(f, id)
        #expect(verdict.state == "rejected")
        #expect(verdict.reason?.contains(reason) == true, "\(verdict)")
        #expect(try await deliveries(f, id).isEmpty)
    }

    @Test func anActivitysIdIsUsedOnceAndItsEndMayNotLingerPastFourHours() async throws {
        let f = try await Self.twoIPhones()
        let first = try await start(f)
        let again = try await start(f)
        try await f.ingest()
        #expect(try await notification(f, first).state == "accepted")
        #expect(try await notification(f, again).reason?.contains("exists already") == true)
        let lingering = try await f.db.query(
            "SELECT herald.end_activity('shop', 'order-42', dismiss_at => now() + interval '5 hours')")[0].decode(
                0, as: Int64.self)
        try await f.ingest()
        #expect(try await notification(f, lingering).reason?.contains("within 4 hours") == true)
    }

    @Test(arguments: [
        (
            "SELECT herald.register_activity_token('shop', 'iphone-apns', 'not-hex', 'DeliveryAttributes')",
            "hexadecimal"
        ),
        (
            "SELECT herald.register_activity_token('shop', 'nobody', repeat('a', 64), 'DeliveryAttributes')",
            "unknown device"
        ),
        ("SELECT herald.register_activity_token('shop', 'pixel', repeat('a', 64), 'DeliveryAttributes')", "iOS's"),
        (
            "SELECT herald.register_activity_token('shop', 'iphone-apns', repeat('a', 64), 'Other', 'order-42')",
            "is a DeliveryAttributes"
        ),
        ("SELECT herald.unregister_activity_token('shop', 'iphone-apns')", "one of them"),
    ])
    func registrationRefusesWhatIsNotAnActivityToken(call: String, message: String) async throws {
        let f = try await Self.twoIPhones()
        try await f.register("pixel", "android")
        _ = try await start(f)
        try await f.ingest()
        let error = await #expect(throws: PostgresError.self) { try await f.db.query(call) }
        #expect(error?.message.contains(message) == true, "\(String(describing: error))")
    }

    @Test func retentionForgetsActivitiesNoDeviceCanStillShow() async throws {
        let f = try await Self.twoIPhones()
        for activity in ["ended-long-ago", "ended-just-now", "quiet-for-a-day", "quiet-for-an-hour"] {
            try await registerUpdateToken(f, "iphone-apns", activity: activity)
        }
        try await f.db.query(
            """
            UPDATE herald.live_activities
            SET state = CASE WHEN activity_id LIKE 'ended%' THEN 'ended' ELSE state END,
                ended_at = CASE activity_id WHEN 'ended-long-ago' THEN now() - interval '2 hours'
                                            WHEN 'ended-just-now' THEN now() END,
                created_at = CASE activity_id WHEN 'quiet-for-a-day' THEN now() - interval '1 day'
                                              WHEN 'quiet-for-an-hour' THEN now() - interval '1 hour'
                                              ELSE created_at END
            """)
        // The iPhone on FCM's push-to-start token ended two hours ago.
        try await f.db.query(
            """
            UPDATE herald.activity_tokens
            SET ended_at = now() - interval '2 hours', ended_cause = 'unregistered', ended_reason = 'the app said so'
            WHERE device_id = (SELECT id FROM herald.devices WHERE device_id = 'iphone-fcm')
            """)
        _ = try await f.db.query("SELECT herald.prune_records(interval '1 hour', 100)")
        let left = try await f.db.query("SELECT activity_id FROM herald.live_activities ORDER BY activity_id").map {
            try $0.decode(0, as: String.self)
        }
        #expect(left == ["ended-just-now", "quiet-for-an-hour"], "one never ended stays 12 hours on a device")
        let tokens = try await f.db.query("SELECT count(*) FROM herald.activity_tokens")[0].decode(0, as: Int.self)
        #expect(tokens == 3, "the live push-to-start token and the two activities' update tokens")
    }

    @Test func onePushToStartTokenServesEveryActivityTypeOfItsDevice() async throws {
        let f = try await Self.twoIPhones()
        // iOS may give the same push-to-start token for every type: both stay live.
        _ = try await f.db.query(
            "SELECT herald.register_activity_token('shop', 'iphone-apns', $1, 'RideAttributes')",
            [Self.token("start-iphone-apns")])
        let live = try await f.db.query(
            """
            SELECT attributes_type FROM herald.activity_tokens t JOIN herald.devices d ON d.id = t.device_id
            WHERE d.device_id = 'iphone-apns' AND t.ended_at IS NULL ORDER BY attributes_type
            """
        ).map { try $0.decode(0, as: String.self) }
        #expect(live == ["DeliveryAttributes", "RideAttributes"])
        // Held by another device, it moves.
        _ = try await f.db.query(
            "SELECT herald.register_activity_token('shop', 'iphone-fcm', $1, 'RideAttributes')",
            [Self.token("start-iphone-apns")])
        let moved = try await f.db.query(
            "SELECT count(*) FROM herald.activity_tokens WHERE token = $1 AND ended_cause = 'replaced'",
            [Self.token("start-iphone-apns")])[0].decode(0, as: Int.self)
        #expect(moved == 2)
    }

    @Test func aTokenRegisteredAfterTheEndStillEndsItsActivity() async throws {
        let f = try await Self.twoIPhones()
        _ = try await start(f)
        try await f.ingest()
        let ended = try await f.db.query("SELECT herald.end_activity('shop', 'order-42', '{\"status\": \"done\"}')")[0]
            .decode(0, as: Int64.self)
        try await f.ingest()
        #expect(try await notification(f, ended).state == "no_devices")
        try await registerUpdateToken(f, "iphone-apns")
        try await f.dispatch()
        let sent = await pushes(f, to: Self.token("update-iphone-apnsorder-42"))
        #expect(sent.map { $0.aps["event"] as? String } == ["end"])
        let token = try await f.db.query(
            "SELECT ended_cause FROM herald.activity_tokens WHERE token = $1",
            [Self.token("update-iphone-apnsorder-42")])
        #expect(try token[0].decode(0, as: String?.self) == "activity_ended")
        // An update older than the end, arriving late, is superseded, not refused.
        let late = try await update(f, "cooking", ", event_at => now() - interval '1 minute'")
        try await f.ingest()
        #expect(try await notification(f, late).state == "superseded")
    }

    @Test func aDismissedActivitysTokenTakesNothingMore() async throws {
        let f = try await Self.twoIPhones()
        _ = try await start(f)
        try await f.ingest()
        try await registerUpdateToken(f, "iphone-apns")
        try await registerUpdateToken(f, "iphone-fcm")
        let ended = try await f.db.query(
            "SELECT herald.unregister_activity_token('shop', 'iphone-apns', activity => 'order-42')")[0].decode(
                0, as: Int.self)
        #expect(ended == 1)
        let updated = try await update(f, "later")
        try await f.ingest()
        try await f.dispatch()
        #expect(try await deliveries(f, updated).map(\.state) == ["sent"], "only the iPhone that still shows it")
        #expect(await fcmPushes(f, to: Self.token("update-iphone-fcmorder-42")).count == 1)
    }

    /// An update dated a little ahead (a producer host whose clock runs 50 s fast) no longer
    /// drops a plain end that follows: the end is ordered after it, whether the update was
    /// ingested already or still waits (issue #40). An end dated before the newest event, and
    /// an event_at from long ago (1900, 4713 BC), are refused at the call, with what to do.
    @Test func aPlainEndIsNeverDroppedBehindAnUpdateFromTheFuture() async throws {
        let f = try await Self.twoIPhones()
        let producer = try await f.producer()
        for activity in ["order-42", "order-43"] {
            _ = try await start(f, activity)
            try await f.ingest()
            try await registerUpdateToken(f, "iphone-apns", activity: activity)
        }
        let ahead = ", event_at => now() + interval '50 seconds'"
        // order-42: the update waits for ingest when the end comes; order-43: it was ingested.
        _ = try await producer.query(
            "SELECT herald.update_activity('shop', 'order-42', '{\"status\": \"ahead\"}'\(ahead))")
        _ = try await producer.query(
            "SELECT herald.update_activity('shop', 'order-43', '{\"status\": \"ahead\"}'\(ahead))")
        try await f.ingest()
        _ = try await producer.query(
            "SELECT herald.update_activity('shop', 'order-42', '{\"status\": \"ahead\"}'\(ahead))")
        var ends: [Int64] = []
        for activity in ["order-42", "order-43"] {
            ends.append(
                try await producer.query("SELECT herald.end_activity('shop', $1)", [activity])[0].decode(
                    0, as: Int64.self))
        }
        try await f.ingest()
        for (activity, end) in zip(["order-42", "order-43"], ends) {
            let verdict = try await notification(f, end)
            #expect(verdict.state == "accepted", "\(activity): \(verdict)")
            let state = try await f.db.query(
                "SELECT state FROM herald.live_activities WHERE activity_id = $1", [activity])[0].decode(
                    0, as: String.self)
            #expect(state == "ended", "\(activity)")
        }

        _ = try await start(f, "order-44")
        try await f.ingest()
        _ = try await producer.query("SELECT herald.update_activity('shop', 'order-44', '{}'\(ahead))")
        let early = await #expect(throws: PostgresError.self) {
            try await producer.query("SELECT herald.end_activity('shop', 'order-44', event_at => now())")
        }
        #expect(early?.sqlState == "23514")
        #expect(early?.message.contains("would be dropped") == true, "\(String(describing: early))")
        for old in ["'1900-01-01'", "'4713-01-01 BC'", "now() - interval '13 hours'"] {
            let refused = await #expect(throws: PostgresError.self, "\(old)") {
                try await producer.query("SELECT herald.update_activity('shop', 'order-44', '{}', event_at => \(old))")
            }
            #expect(refused?.message.contains("more than 12 hours ago") == true, "\(String(describing: refused))")
        }
    }
}
