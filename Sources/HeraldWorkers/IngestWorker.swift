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

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        var outcomes: [Int64: JobOutcome] = [:]
        var ids: [Int64] = []
        for job in jobs {
            if let ref = job.ref {
                ids.append(ref)
            } else {
                outcomes[job.id] = .dead(reason: "ingest job \(job.id) names no notification (ref is NULL)")
            }
        }
        guard !ids.isEmpty else { return outcomes }
        do {
            let now = context.clock.now()
            let counts = try await context.connection.query(
                "SELECT accepted, rejected, expired, no_devices, deliveries FROM herald.ingest($1::bigint[], $2)", [ids, now])[0]
            let names = ["accepted", "rejected", "expired", "no_devices", "deliveries"]
            let values = try names.indices.map { try counts.decode($0, as: Int.self) }
            let rejected = values[1]
            context.logger.debug(
                "ingested notifications",
                metadata: Dictionary(uniqueKeysWithValues: zip(names, values.map { Logger.MetadataValue.stringConvertible($0) })))
            if rejected > 0 {
                context.logger.notice("rejected notifications; see herald.notifications.reason", metadata: ["count": "\(rejected)"])
            }
            for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = .completed }
        } catch {
            context.logger.error("ingest failed; the batch will be retried", metadata: ["error": "\(error)"])
            for job in jobs where outcomes[job.id] == nil { outcomes[job.id] = .retry(error: "ingest failed: \(error)") }
        }
        return outcomes
    }
}
