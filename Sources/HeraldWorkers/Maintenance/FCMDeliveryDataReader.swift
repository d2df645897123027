import Foundation
import HeraldCore
import HeraldFCM
import HeraldHTTP
import HeraldPostgres
import Logging
import ServiceLifecycle

/// Reads each Android app's FCM delivery data once a day (the apps whose `herald.app_fcm` names
/// their `android_app_id`): Google's shares of what it accepted for the app each day, delivered,
/// pending, collapsed or dropped, kept in `herald.fcm_delivery_days` beside Herald's own count of
/// what it sent through FCM to the app's Android devices that day. An app is claimed by one daemon
/// at a time (`herald.claim_fcm_delivery_reads`, which moves its next read on), and a read that
/// fails is kept with its problem in `herald.fcm_delivery_reads` and tried again an hour later.
///
/// Every `herald run` runs one, on a connection of its own, as it runs the ``Pruner``: a read is
/// rare and its count reads a day of deliveries, which no worker's batch should wait behind.
public struct FCMDeliveryDataReader: Service {
    /// How often it looks for an app due.
    public static let interval: Duration = .seconds(600)
    /// How long a claim holds an app before another daemon may read it.
    public static let lease: Duration = .seconds(600)

    let connection: PostgresConnection
    let http: HTTPClient
    /// A stand-in's base URL for Google's APIs (`HERALD_FCM_ENDPOINT`); nil: Google's.
    let endpoint: String?
    let defaultCredentialsFile: String?
    /// The retention (`HERALD_RETENTION`): days older than it are not kept.
    let retention: Duration
    let clock: any WallClock
    let logger: Logger

    public init(
        connection: PostgresConnection, http: HTTPClient, endpoint: String?, defaultCredentialsFile: String?,
        retention: Duration = Pruner.defaultRetention, clock: any WallClock = SystemClock(), logger: Logger
    ) {
        self.connection = connection
        self.http = http
        self.endpoint = endpoint
        self.defaultCredentialsFile = defaultCredentialsFile
        self.retention = retention
        self.clock = clock
        self.logger = logger
    }

    enum SQL {
        static let claim = """
            SELECT app_id, project_id, credentials_file, android_app_id
            FROM herald.claim_fcm_delivery_reads($1, make_interval(secs => $2))
            """
        static let record = """
            SELECT herald.record_fcm_delivery_days($1, $2::herald.fcm_delivery_day[], $3, $4, make_interval(secs => $5))
            """
    }

    /// A day as `herald.fcm_delivery_day` takes it.
    struct DayRow: PostgresComposite {
        var day: FCMDeliveryData.Day

        func writeFields(to record: inout PostgresRecordWriter) {
            record.append(day.day)
            record.append(day.label)
            record.append(day.accepted)
            record.append(day.data)
        }
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            await withGracefulShutdownHandler {
                do {
                    _ = try await pass()
                } catch {
                    if !Task.isShuttingDownGracefully {
                        logger.error(
                            "reading FCM's delivery data failed; will try again", metadata: ["error": "\(error)"])
                    }
                }
            } onGracefulShutdown: { [connection] in
                connection.cancel()
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.interval) }
        }
    }

    /// Reads every app due now; returns how many it read (with or without a problem).
    @discardableResult
    public func pass() async throws -> Int {
        let due = try await connection.query(SQL.claim, [clock.now(), Self.lease.seconds])
        for row in due {
            let app: String = try row.decode(0)
            let project: String = try row.decode(1)
            let file = try row.decode(2, as: String?.self) ?? defaultCredentialsFile
            let androidApp: String = try row.decode(3)
            var days: [FCMDeliveryData.Day] = []
            var problem: String?
            do {
                guard let file else {
                    throw FCMDeliveryData.Failure(
                        description:
                            "no credentials_file in herald.app_fcm and GOOGLE_APPLICATION_CREDENTIALS is not set")
                }
                let account: ServiceAccount
                do {
                    account = try ServiceAccount.load(file: file)
                } catch {
                    throw FCMDeliveryData.Failure(description: "\(error)")
                }
                // The token's times are Google's, real ones, whatever clock schedules the reads.
                let reader = FCMDeliveryData(
                    tokens: AccessTokenSource(
                        account: account, http: http, logger: logger, scope: FCMDeliveryData.scope),
                    http: http, endpoint: endpoint)
                days = try await reader.days(project: project, androidAppID: androidApp)
            } catch {
                problem = "\(error)"
                logger.warning(
                    "could not read an app's FCM delivery data; trying again in an hour",
                    metadata: ["app": "\(app)", "problem": "\(error)"])
            }
            do {
                try await connection.query(
                    SQL.record, [app, days.map(DayRow.init), clock.now(), problem, retention.seconds])
            } catch {
                // What Google gave could not be kept (a row PostgreSQL refuses): kept as the read's
                // problem, so that it is tried again in an hour, and the other apps go on.
                logger.warning(
                    "could not keep an app's FCM delivery data; trying again in an hour",
                    metadata: ["app": "\(app)", "error": "\(error)"])
                try await connection.query(
                    SQL.record,
                    [
                        app, [DayRow](), clock.now(), "Google's delivery data could not be kept: \(error)",
                        retention.seconds,
                    ])
            }
        }
        return due.count
    }
}
