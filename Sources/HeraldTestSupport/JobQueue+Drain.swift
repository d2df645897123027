import HeraldQueue

extension JobQueue {
    /// Claims, handles and finishes every due job of the handler's kind, batch by batch, in
    /// the caller's task: a `WorkerRunner` without the waiting, for tests.
    public func drain(_ handler: any JobHandler, batchSize: Int = 100) async throws {
        while true {
            let jobs = try await claim(kind: handler.kind, limit: batchSize)
            if jobs.isEmpty { return }
            let outcomes = await handler.handle(jobs)
            try await finish(jobs.map { ($0, outcomes[$0.id]!) })
        }
    }
}
