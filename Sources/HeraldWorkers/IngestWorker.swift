import HeraldPostgres
import HeraldQueue
import Logging

/// Turns new notifications into deliveries, a batch at a time, with one call to
/// `herald.ingest` (see `migrations/002_producer_contract.sql`): bad ones are kept and
/// rejected with their reason, the rest fan out to one delivery per enabled device and are
/// queued for dispatch.
///
/// `herald.ingest` touches only notifications still `received`, so a batch repeated after a
/// crash changes nothing.
public struct IngestWorker: JobHandler {
    public let kind = "ingest"
    let context: WorkerContext

    public init(context: WorkerContext) { self.context = context }

    enum SQL {
        static let ingest =
            "SELECT accepted, rejected, expired, no_devices, deliveries FROM herald.ingest($1::bigint[], $2)"
        static let rejectUnprocessable = """
            UPDATE herald.notifications SET state = 'rejected', reason = $2, ingested_at = now()
            WHERE id = $1 AND state = 'received'
            """
    }

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        var (ids, outcomes) = jobs.refs(naming: "notification")
        guard !ids.isEmpty else { return outcomes }
        do {
            try await ingest(ids)
        } catch {
            // One bad row must not block the rest: go one by one, and reject what still fails.
            context.logger.warning(
                "ingesting a batch failed; retrying its notifications one at a time", metadata: ["error": "\(error)"])
            for id in ids {
                do {
                    try await ingest([id])
                } catch let error as PostgresError where error.kind == .server {
                    do {
                        try await context.connection.query(SQL.rejectUnprocessable, [id, "ingest failed: \(error)"])
                        context.logger.error(
                            "rejected a notification that cannot be ingested",
                            metadata: ["notification": "\(id)", "error": "\(error)"])
                    } catch {
                        for job in jobs where job.ref == id {
                            outcomes[job.id] = .retry(error: "ingest failed: \(error)")
                        }
                    }
                } catch {
                    // The connection, not the row: try the job again later.
                    for job in jobs where job.ref == id { outcomes[job.id] = .retry(error: "ingest failed: \(error)") }
                }
            }
        }
        for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = .completed }
        return outcomes
    }

    /// One call to `herald.ingest` for these notifications.
    func ingest(_ ids: [Int64]) async throws {
        let counts = try await context.connection.query(SQL.ingest, [ids, context.clock.now()])[0]
        let names = ["accepted", "rejected", "expired", "no_devices", "deliveries"]
        let values = try names.indices.map { try counts.decode($0, as: Int.self) }
        context.logger.debug(
            "ingested notifications",
            metadata: Dictionary(
                uniqueKeysWithValues: zip(names, values.map { Logger.MetadataValue.stringConvertible($0) })))
        if values[1] > 0 {
            context.logger.notice(
                "rejected notifications; see herald.notifications.reason", metadata: ["count": "\(values[1])"])
        }
    }
}
