import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Testing

@Suite struct RetryWorkerTests {
    /// A delivery waiting out a backoff ends as soon as the retry worker sees that it can no
    /// longer be sent, not at its next claim (up to the backoff's cap later).
    @Test func waitsThatCanNoLongerEndInASendEndAtTheNextPass() async throws {
        let f = try await WorkerFixture.make()
        for device in ["late", "gone", "patient"] {
            try await f.register(device, "android", user: device)
            await f.emulator.setBehaviour(.unavailable(retryAfter: 600), forToken: "token-\(device)")
            _ = try await f.db.query("SELECT herald.send('shop', user_ref => $1, title => 'Hi')", [device])
        }
        try await f.ingest()
        try await f.dispatch()
        #expect(try await f.delivery(of: "late").state == "queued")

        try await f.db.execute(
            "UPDATE herald.notifications SET expires_at = now() - interval '1 second' WHERE user_ref = 'late'")
        _ = try await f.db.query("SELECT herald.unregister_device('shop', 'gone')")
        #expect(try await RetryWorker(context: f.context).runBatch(limit: 10) { false } == 0)

        let late = try await f.delivery(of: "late")
        #expect(late.state == "expired")
        #expect(late.error?.contains("while waiting to be retried") == true)
        let gone = try await f.delivery(of: "gone")
        #expect(gone.state == "cancelled")
        #expect(gone.error?.contains("logged out") == true)
        #expect(try await f.delivery(of: "patient").state == "queued")
        let ended = try await f.db.query(
            """
            SELECT count(*) FROM herald.deliveries
            WHERE state IN ('expired', 'cancelled') AND finished_at IS NOT NULL AND run_at IS NULL
              AND cardinality(error_history) = 2
            """)[0].decode(0, as: Int.self)
        #expect(ended == 2)
        // Nothing was sent again, and a second pass finds nothing more to end.
        #expect(await f.emulator.sendRequests == 3)
        #expect(try await RetryWorker(context: f.context).runBatch(limit: 10) { false } == 0)
        #expect(try await f.delivery(of: "patient").state == "queued")
    }

    /// A leased delivery is the claim's to decide, even once it could no longer be sent.
    @Test func leasedDeliveriesAreLeftToTheirClaim() async throws {
        let f = try await WorkerFixture.make()
        try await f.register("phone", "android")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await f.ingest()
        try await f.db.execute(
            """
            UPDATE herald.deliveries SET attempts = 1, locked_by = 'elsewhere', run_at = now() + interval '1 minute';
            UPDATE herald.notifications SET expires_at = now() - interval '1 second';
            """)
        _ = try await RetryWorker(context: f.context).runBatch(limit: 10) { false }
        #expect(try await f.delivery(of: "phone").state == "queued")
    }

    /// Jobs whose worker died holding them are returned to the queue, with the attempt counted.
    @Test func expiredJobLeasesAreRescued() async throws {
        let clock = ManualClock(Date())
        let f = try await WorkerFixture.make(clock: clock)
        let id = try await f.queue.enqueue(kind: "reconcile", ref: 1, runAt: clock.now())
        #expect(try await f.queue.claim(kind: "reconcile", limit: 10).map(\.id) == [id])
        clock.advance(by: f.context.lease + .seconds(1))
        _ = try await RetryWorker(context: f.context).runBatch(limit: 10) { false }
        let row = try await f.db.query("SELECT state, attempts, last_error FROM herald.jobs WHERE id = $1", [id])[0]
        #expect(try row.decode(0, as: String.self) == "ready")
        #expect(try row.decode(1, as: Int.self) == 1)
        #expect(try row.decode(2, as: String.self).contains("lease expired"))
    }
}
