import Foundation
import HeraldCore
import HeraldHTTP
import HeraldPostgres
import HeraldTestSupport
import HeraldWorkers
import Logging
import Testing

/// FCM's delivery data, read once a day per Android app from the FCM Data API's stand-in (which
/// asks for the `cloud-platform` scope and pages as Google does), and kept beside Herald's own
/// count of the day.
@Suite struct FCMDeliveryDataTests {
    static let androidApp = "1:1234567890:android:0a1b2c3d4e5f"

    /// The reader, as the daemon's role.
    func reader(_ f: WorkerFixture, clock: any WallClock) async throws -> FCMDeliveryDataReader {
        FCMDeliveryDataReader(
            connection: try await f.daemonConnection(), http: HTTPClient(),
            endpoint: f.emulator.baseURL, defaultCredentialsFile: nil, clock: clock, logger: Logger(label: "test"))
    }

    static func row(_ day: Date, label: String?, accepted: Int, delivered: Double) -> [String: Any] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "America/Los_Angeles")!
        let parts = calendar.dateComponents([.year, .month, .day], from: day)
        var row: [String: Any] = [
            "appId": androidApp, "date": ["year": parts.year!, "month": parts.month!, "day": parts.day!],
            "data": [
                "countMessagesAccepted": "\(accepted)",
                "messageOutcomePercents": [
                    "delivered": delivered, "pending": 100 - delivered - 1, "droppedDeviceInactive": 1,
                ],
                "deliveryPerformancePercents": ["deliveredNoDelay": delivered],
            ],
        ]
        if let label { row["analyticsLabel"] = label }
        return row
    }

    @Test func googlesFiguresAreKeptBesideHeraldsCountOfTheDay() async throws {
        let f = try await WorkerFixture.make()
        try await f.db.query("UPDATE herald.app_fcm SET android_app_id = $1 WHERE app_id = 'shop'", [Self.androidApp])
        try await f.register("pixel", "android")
        try await f.register("galaxy", "android")
        try await f.register("iphone", "ios")
        try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Sale')")
        try await f.ingest()
        try await f.dispatch()
        let now = Date()
        // Today's and yesterday's, and a thousand labels of yesterday's: two pages.
        let yesterday = now.addingTimeInterval(-86_400)
        await f.emulator.setFCMDeliveryData(
            project: "shop-prod", appID: Self.androidApp,
            rows: [
                Self.row(now, label: nil, accepted: 2, delivered: 97.5),
                Self.row(yesterday, label: nil, accepted: 0, delivered: 0),
            ]
                + (0..<1000).map { Self.row(yesterday, label: "campaign-\($0)", accepted: $0, delivered: 90) })
        let clock = ManualClock(now)
        let reader = try await reader(f, clock: clock)
        #expect(try await reader.pass() == 1)
        #expect(await f.emulator.fcmDeliveryDataRequests == 2, "two pages")
        let today = try await f.db.query(
            """
            SELECT accepted, delivered, pending, dropped_device_inactive, herald_sent, herald_held,
                   data #>> '{deliveryPerformancePercents,deliveredNoDelay}'
            FROM herald.fcm_delivery_days
            WHERE app_id = 'shop' AND analytics_label = '' AND day = (now() AT TIME ZONE 'America/Los_Angeles')::date
            """)[0]
        #expect(try today.decode(0, as: Int64?.self) == 2)
        #expect(try today.decode(1, as: Double?.self) == 97.5)
        #expect(try today.decode(2, as: Double?.self) == 1.5)
        #expect(try today.decode(3, as: Double?.self) == 1)
        #expect(
            try today.decode(4, as: Int64?.self) == 2,
            "Herald sent the two Android phones theirs; the iPhone's is not Android's")
        #expect(try today.decode(5, as: Int64?.self) == 0)
        #expect(try today.decode(6, as: String?.self) == "97.5", "Google's whole data object is kept")
        let counts = try await f.db.query(
            "SELECT count(*), count(herald_sent) FROM herald.fcm_delivery_days WHERE app_id = 'shop'")[0]
        #expect(try counts.decode(0, as: Int.self) == 1002)
        // On the row of no label, of a day whose deliveries Herald has: yesterday's is before this
        // database's first generation.
        #expect(try counts.decode(1, as: Int.self) == 1, "Herald's count is on the row of no label, of today")
        // Read for the day: the next pass reads nothing until a day has passed.
        #expect(try await reader.pass() == 0)
        clock.advance(by: .seconds(86_400))
        await f.emulator.setFCMDeliveryData(
            project: "shop-prod", appID: Self.androidApp, rows: [Self.row(now, label: nil, accepted: 2, delivered: 100)]
        )
        #expect(try await reader.pass() == 1)
        #expect(
            try await f.db.query(
                "SELECT delivered FROM herald.fcm_delivery_days WHERE analytics_label = '' AND accepted = 2")[0]
                .decode(0, as: Double?.self) == 100, "a day read again takes Google's newer figures")
    }

    /// Google refusing (an app it has no data of, a project the account cannot read) is kept with
    /// its problem, nothing else changes, and the read is tried again an hour later.
    @Test func aRefusalIsKeptWithWhatToCheckAndTriedAgainInAnHour() async throws {
        let f = try await WorkerFixture.make()
        try await f.db.query("UPDATE herald.app_fcm SET android_app_id = $1 WHERE app_id = 'shop'", [Self.androidApp])
        let clock = ManualClock(Date())
        let reader = try await reader(f, clock: clock)
        #expect(try await reader.pass() == 1)
        let read = try await f.db.query(
            "SELECT problem, read_at, next_read_at FROM herald.fcm_delivery_reads WHERE app_id = 'shop'")[0]
        let problem = try read.decode(0, as: String?.self) ?? ""
        #expect(problem.contains("404") && problem.contains("android_app_id (\(Self.androidApp))"), "\(problem)")
        #expect(try read.decode(1, as: Date?.self) == nil)
        #expect(abs(try read.decode(2, as: Date.self).timeIntervalSince(clock.now()) - 3600) < 0.001)
        #expect(try await f.db.query("SELECT count(*) FROM herald.fcm_delivery_days")[0].decode(0, as: Int.self) == 0)
        clock.advance(by: .seconds(600))
        #expect(try await reader.pass() == 0, "not before the hour")
        clock.advance(by: .seconds(3000))
        #expect(try await reader.pass() == 1)
    }
}
