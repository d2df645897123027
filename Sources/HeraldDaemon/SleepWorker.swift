import Foundation
import HeraldQueue

/// A diagnostic worker for job kind `sleep`: it waits `ms` milliseconds from the job's payload,
/// then completes the job, or retries it with the payload's `fail` text as the error.
///
/// It exercises the queue, leases and shutdown end to end without touching FCM, so operators
/// can check a deployment and tests can crash a daemon mid-batch. It runs only when named
/// in `HERALD_WORKERS`.
public struct SleepWorker: JobHandler {
    public let kind = "sleep"

    public init() {}

    struct Payload: Decodable {
        var ms: Int?
        var fail: String?
    }

    public func handle(_ jobs: [Job]) async -> [Int64: JobOutcome] {
        var outcomes: [Int64: JobOutcome] = [:]
        var longest = 0
        for job in jobs {
            guard let payload = try? JSONDecoder().decode(Payload.self, from: Data(job.payload.utf8)) else {
                outcomes[job.id] = .dead(
                    reason: "sleep job \(job.id): payload must be {\"ms\": <int>, \"fail\": <text>}")
                continue
            }
            longest = max(longest, payload.ms ?? 0)
            outcomes[job.id] = payload.fail.map { .retry(error: $0) } ?? .completed
        }
        // The batch is finished even during a graceful shutdown, so this sleep is not cancelled early.
        if longest > 0 { try? await Task.sleep(for: .milliseconds(longest)) }
        return outcomes
    }
}
