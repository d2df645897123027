import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import Logging
import Testing

@testable import HeraldWorkers

/// What the workers' concurrent parts answer, worked many times over. Run these in a release
/// build too (`scripts/test-release.sh`): the optimizer has miscompiled a child task's closure
/// here (issue #40) where the debug build was right.
@Suite struct WorkerConcurrencyTests {
    /// A producer's create and delete of one channel in one transaction, and two creates in one
    /// statement, give the channels worker several jobs at once, some about the same channel.
    /// Every job gets its own whole outcome, round after round: in the release build of
    /// bed7f6c the child tasks' outcomes came back as garbage (an empty reason, a zero
    /// `notBefore`), then crashed the daemon.
    @Test func aProducersChannelCallsGetEveryJobAWholeOutcome() async throws {
        let f = try await WorkerFixture.make(apns: true)
        let producer = try await f.producer()
        try await producer.execute(
            "BEGIN; SELECT herald.create_channel('shop', 'c1'); SELECT herald.delete_channel('shop', 'c1'); COMMIT;")
        _ = try await producer.query(
            "SELECT herald.create_channel('shop', 'c2'), herald.create_channel('shop', 'c3')")
        // The key cannot be read: every request is tried again later, with the reason.
        try await f.db.query("UPDATE herald.app_apns SET key_file = '/nonexistent/AuthKey.p8'")
        let jobs = try await f.queue.claim(kind: "channels", limit: 10)
        #expect(jobs.count == 4)
        let deleted = try await f.db.query("SELECT id FROM herald.broadcast_channels WHERE name = 'c1'")[0]
            .decode(0, as: Int64.self)
        let worker = ChannelWorker(context: f.context)
        for round in 0..<200 {
            let outcomes = await worker.handle(jobs)
            #expect(outcomes.count == jobs.count, "round \(round)")
            for job in jobs {
                let outcome = outcomes[job.id]
                if job.ref == deleted {
                    #expect(outcome == .completed, "round \(round), job \(job.id): \(String(describing: outcome))")
                } else if case .retry(let error, let notBefore) = outcome {
                    #expect(error.contains("/nonexistent/AuthKey.p8"), "round \(round): \(error)")
                    #expect(notBefore == nil, "round \(round)")
                } else {
                    Issue.record("round \(round), job \(job.id): \(String(describing: outcome))")
                }
            }
            if outcomes.count != jobs.count { break }
        }
        try await f.queue.finish(jobs.map { ($0, .retry(error: "again")) })
    }
}
