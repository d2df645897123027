import Foundation
import HeraldPostgres
import HeraldQueue
import HeraldTestSupport
import HeraldWorkers
import Testing

@Suite struct DaemonRoleTests {
    @Test func theDaemonRoleRunsTheWorkersButCannotChangeTheSchemaOrTheSecrets() async throws {
        let f = try await WorkerFixture.make()
        let daemon = try await f.daemonConnection()
        var context = f.context
        context.connection = daemon
        let queue = JobQueue(connection: daemon, workerID: "daemon-role", clock: context.clock)

        // The whole pipeline as the daemon: ingest, dispatch, a report, reconcile, status, pruning.
        try await f.register("iphone", "ios")
        _ = try await f.db.query("SELECT herald.send('shop', user_ref => 'alice', title => 'Hi')")
        try await IngestWorker(context: context).drain()
        try await DispatchWorker(context: context).drain()
        #expect(try await f.delivery(of: "iphone").state == "sent")
        let reference = try await f.db.query("SELECT herald.delivery_reference(id, device_id) FROM herald.deliveries")[
            0
        ]
        .decode(0, as: String.self)
        _ = try await f.db.query("SELECT herald.report_delivery($1)", [reference])
        try await queue.drain(ReconcileWorker(context: context))
        #expect(try await f.delivery(of: "iphone").state == "delivered")
        _ = try await daemon.query("SELECT * FROM herald.queue_depth")
        _ = try await daemon.query("SELECT * FROM herald.prune(interval '7 days', 100, 0)")
        _ = try await daemon.query("SELECT version FROM herald.schema_migrations")
        _ = try await daemon.query("SELECT file, checksum FROM herald.schema_functions")

        for forbidden in [
            "CREATE TABLE herald.extra (id int)",
            "DROP TABLE herald.jobs",
            "ALTER TABLE herald.devices ADD COLUMN x int",
            "UPDATE herald.secrets SET value = value",
            "DELETE FROM herald.schema_migrations",
            "DELETE FROM herald.schema_functions",
        ] {
            let error = await #expect(throws: PostgresError.self, "\(forbidden)") {
                try await daemon.execute(forbidden)
            }
            #expect(["42501", "42P01"].contains(error?.sqlState ?? ""), "\(forbidden): \(error?.message ?? "")")
        }
    }
}
