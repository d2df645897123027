import Foundation
import HeraldEmulator
import HeraldPostgres
import HeraldQueue
import HeraldStatus
import HeraldTestSupport
import HeraldWorkers
import Testing

/// A slow or stuck route holds back only its own deliveries: each route's outcomes are
/// recorded when its answers come in, while the dispatch loop claims and sends the others.
@Suite struct RouteIsolationTests {
    func states(_ f: WorkerFixture, devices pattern: String) async throws -> [String: Int] {
        let rows = try await f.db.query(
            """
            SELECT d.state, count(*) FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
            WHERE dev.device_id LIKE $1 GROUP BY d.state
            """, [pattern])
        return Dictionary(
            uniqueKeysWithValues: try rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int.self)) })
    }

    @Test func slowAPNsDoesNotHoldBackTheSameAppsAndroidPhones() async throws {
        let f = try await WorkerFixture.make(apns: true)
        for n in 0..<20 {
            let token = try await f.registerIPhone("iphone-\(n)", user: "ios-\(n)")
            // Slow enough that the Android phones are sent first even on a machine busy with the
            // whole suite (3 s was not, once).
            await f.emulator.setBehaviour(.slow(milliseconds: 8000), forToken: token)
        }
        for n in 0..<30 { try await f.register("pixel-\(n)", "android", user: "android-\(n)") }
        // The iPhones' notifications first, so the first claims bring both routes.
        try await f.db.execute(
            """
            SELECT herald.send('shop', user_ref => 'ios-' || n, title => 'slow') FROM generate_series(0, 19) AS n;
            SELECT herald.send('shop', user_ref => 'android-' || n, title => 'fast') FROM generate_series(0, 29) AS n;
            """)
        try await f.ingest()
        let dispatch = Task { try await f.dispatch() }
        // Every phone's delivery is recorded while APNs still works on the iPhones'.
        #expect(
            try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
                try await states(f, devices: "pixel-%")["sent"] == 30
            })
        let iphones = try await states(f, devices: "iphone-%")
        #expect(iphones["sent"] == nil, "\(iphones)")
        try await dispatch.value
        #expect(try await states(f, devices: "iphone-%") == ["sent": 20])
        #expect(await f.emulator.received.count == 30, "each phone once")
        #expect(await f.emulator.apnsReceived.count == 20, "each iPhone once")
    }

    /// Two apps on one daemon, each with its own FCM project: one whose project answers half
    /// its sends in 1.5 s and refuses the rest (500), one healthy. The healthy app's phones are all sent while the other's
    /// still wait, and the refused ones are retried, not sent twice or lost.
    @Test func aFailingFCMProjectDoesNotHoldBackAnotherApps() async throws {
        let f = try await WorkerFixture.make()
        let account = try await f.emulator.makeServiceAccount(projectID: "games-prod")
        let file = try ServiceAccountFile(account)
        defer { file.remove() }
        try await f.db.addApp("games", fcmProject: "games-prod", credentialsFile: file.path)
        try await f.db.execute("INSERT INTO herald.producer_apps (producer, app_id) VALUES ('postgres', 'games')")
        for n in 0..<16 {
            _ = try await f.db.query(
                "SELECT herald.register_device('games', $1, 'android', $2, $3)",
                ["console-\(n)", "token-console-\(n)", "player-\(n)"])
            await f.emulator.setBehaviour(
                n.isMultiple(of: 2) ? .slow(milliseconds: 1500) : .internalError, forToken: "token-console-\(n)")
        }
        for n in 0..<30 { try await f.register("pixel-\(n)", "android", user: "shopper-\(n)") }
        try await f.db.execute(
            """
            SELECT herald.send('games', user_ref => 'player-' || n, title => 'slow') FROM generate_series(0, 15) AS n;
            SELECT herald.send('shop', user_ref => 'shopper-' || n, title => 'fast') FROM generate_series(0, 29) AS n;
            """)
        try await f.ingest()
        let dispatch = Task { try await f.dispatch() }
        #expect(
            try await eventually(timeout: .seconds(20), every: .milliseconds(20)) {
                try await states(f, devices: "pixel-%")["sent"] == 30
            })
        #expect(try await states(f, devices: "console-%")["sent"] == nil)
        try await dispatch.value
        let games = try await states(f, devices: "console-%")
        #expect(games == ["sent": 8, "queued": 8], "the refused ones wait for their retry: \(games)")
        #expect(await f.emulator.received.filter { $0.projectID == "shop-prod" }.count == 30, "each phone once")
        #expect(await f.emulator.received.filter { $0.projectID == "games-prod" }.count == 8)
    }

    @Test func aStuckPushServiceDoesNotHoldBackAHealthyOne() async throws {
        let f = try await WorkerFixture.make(webPush: true)
        let hole = try BlackHole()
        try await f.registerBrowser("healthy")
        // A browser whose push service takes the connection and never answers.
        let stuck = try await f.emulator.subscribe(
            base: try #require(f.pushService).baseURL, applicationServerKey: try #require(f.vapid).publicKey)
        let endpoint = hole.baseURL + "/push/" + stuck.endpoint.split(separator: "/").last!
        let json = stuck.json.replacingOccurrences(of: stuck.endpoint, with: endpoint)
        _ = try await f.db.query("SELECT herald.register_device('shop', 'stuck', 'web', $1, 'bob')", [json])
        try await f.db.execute(
            """
            SELECT herald.send('shop', user_ref => 'bob', title => 'into the void');
            SELECT herald.send('shop', user_ref => 'alice', title => 'hello');
            """)
        try await f.ingest()
        let dispatch = Task { try await f.dispatch() }
        #expect(
            try await eventually(timeout: .seconds(8), every: .milliseconds(20)) {
                try await f.delivery(of: "healthy").state == "sent"
            })
        // The stuck one is still in flight: nothing recorded for it yet.
        let waiting = try await f.db.query(
            """
            SELECT d.locked_by IS NOT NULL FROM herald.deliveries d JOIN herald.devices dev ON dev.id = d.device_id
            WHERE dev.device_id = 'stuck'
            """)[0].decode(0, as: Bool.self)
        #expect(waiting)
        try await dispatch.value
        let ended = try await f.delivery(of: "stuck")
        #expect(
            ended.state == "queued" && ended.error?.hasPrefix("push service did not answer in time: ") == true,
            "\(ended)")
        #expect(await f.emulator.webPushes.count == 1)
    }

    /// A route answering more slowly than the lease keeps its deliveries leased while it sends:
    /// a second worker claiming all along takes none of them, so none is sent twice.
    @Test func aRouteSlowerThanTheLeaseKeepsItsLeases() async throws {
        let f = try await WorkerFixture.make(apns: true)
        for n in 0..<5 {
            let token = try await f.registerIPhone("iphone-\(n)", user: "ios-\(n)")
            await f.emulator.setBehaviour(.slow(milliseconds: 5000), forToken: token)
        }
        try await f.db.execute(
            "SELECT herald.send('shop', user_ref => 'ios-' || n, title => 'slow') FROM generate_series(0, 4) AS n")
        try await f.ingest()
        var first = f.context
        first.lease = .seconds(2)
        var second = first
        second.workerID = "other"
        second.connection = try await f.database.connect()
        let slow = DispatchWorker(context: first)
        let other = DispatchWorker(context: second)
        #expect(try await slow.runBatch(limit: 100, isStopping: { false }) == 5)
        // The other worker claims every 100 ms while the sends are out, more than twice the lease.
        let until = ContinuousClock.now + .seconds(6)
        var taken = 0
        while ContinuousClock.now < until {
            taken += try await other.runBatch(limit: 100, isStopping: { false })
            try await Task.sleep(for: .milliseconds(100))
        }
        await slow.finish()
        await other.finish()
        #expect(taken == 0, "the other worker claimed deliveries still being sent")
        #expect(try await states(f, devices: "iphone-%") == ["sent": 5])
        #expect(await f.emulator.apnsReceived.count == 5, "each iPhone once")
    }

    /// A slow route whose window is full postpones its newer deliveries, and operators see it:
    /// a row of herald.route_saturation, and a line of `herald status`.
    @Test func aSaturatedRouteIsRecordedForHeraldStatus() async throws {
        let f = try await WorkerFixture.make(apns: true)
        for n in 0..<130 {
            let token = try await f.registerIPhone("iphone-\(n)", user: "ios-\(n)")
            await f.emulator.setBehaviour(.slow(milliseconds: 4000), forToken: token)
        }
        let worker = DispatchWorker(context: f.context)
        try await f.db.execute(
            "SELECT herald.send('shop', user_ref => 'ios-' || n, title => 'first') FROM generate_series(0, 119) AS n")
        try await f.ingest()
        #expect(try await worker.runBatch(limit: 120, isStopping: { false }) == 120)
        // Over a second later the route is slow, and its window (the claim's size, 100 at least)
        // is full.
        try await Task.sleep(for: .milliseconds(1200))
        try await f.db.execute(
            "SELECT herald.send('shop', user_ref => 'ios-' || n, title => 'more') FROM generate_series(120, 129) AS n")
        try await f.ingest()
        #expect(try await worker.runBatch(limit: 100, isStopping: { false }) == 10)
        // Recorded beside the claim, not in its way.
        #expect(
            try await eventually(timeout: .seconds(5), every: .milliseconds(20)) {
                try await f.db.query("SELECT 1 FROM herald.route_saturation").count == 1
            })
        let row = try await f.db.query(
            "SELECT route, origin, in_flight, postponed FROM herald.route_saturation WHERE app_id = 'shop'")
        #expect(row.count == 1)
        if let row = row.first {
            #expect(try row.decode("route", as: String.self) == "apns")
            #expect(try row.decode("in_flight", as: Int.self) == 120)
            #expect(try row.decode("postponed", as: Int.self) == 10)
        }
        let problems = try await StatusReport.load(f.db).problems(maximumReadyAge: 3600)
        #expect(
            problems.contains {
                $0.hasPrefix("app shop, route apns: slow, its window is full (120 in flight, 10 postponed")
            },
            "\(problems)")
        await worker.finish()
        // The postponed ones were not attempted: no attempt spent, no error recorded.
        let waiting = try await f.db.query(
            "SELECT count(*) FROM herald.deliveries WHERE state = 'queued' AND attempts = 0 AND last_error IS NULL")
        #expect(try waiting[0].decode(0, as: Int.self) == 10)
    }
}
