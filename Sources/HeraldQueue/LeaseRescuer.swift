import Logging
import ServiceLifecycle

/// Returns jobs whose lease expired to the queue: their process died or hung while holding
/// them. The attempt is counted, so a job that keeps killing its worker ends dead.
///
/// Every daemon runs one; they share the work safely, since the rescue skips rows that
/// another rescuer has locked.
public struct LeaseRescuer: Service {
    /// How often to look for expired leases. Default 5 s.
    public static let defaultInterval: Duration = .seconds(5)
    /// Rows rescued per statement; it repeats until a pass finds fewer. Default 1,000.
    public static let batchSize = 1000

    let queue: JobQueue
    let hub: WakeHub
    let interval: Duration
    let logger: Logger

    public init(queue: JobQueue, hub: WakeHub, interval: Duration = LeaseRescuer.defaultInterval, logger: Logger) {
        self.queue = queue
        self.hub = hub
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await rescueAll()
            } catch {
                logger.error("lease rescue failed; will try again", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }

    /// Rescues every expired lease now.
    public func rescueAll() async throws {
        while true {
            let report = try await queue.rescueExpiredLeases(limit: Self.batchSize)
            if report.isEmpty { return }
            for (kind, count) in report.rescued {
                logger.warning("rescued jobs whose lease expired", metadata: ["kind": "\(kind)", "count": "\(count)"])
                hub.wake(kind: kind)
            }
            for (kind, count) in report.dead {
                logger.error(
                    "jobs ran out of attempts after their lease expired; they are dead",
                    metadata: ["kind": "\(kind)", "count": "\(count)"])
            }
            if report.rescued.values.reduce(0, +) + report.dead.values.reduce(0, +) < Self.batchSize { return }
        }
    }
}
