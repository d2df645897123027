import HeraldQueue

extension JobQueue {
    /// Claims, handles and finishes every due job of the handler's kind, batch by batch, in
    /// the caller's task: a `WorkerRunner` without the waiting, for tests.
    public func drain(_ handler: any JobHandler, batchSize: Int = 100) async throws {
        try await JobWorker(handler, queue: self, logger: .init(label: "test")).drain(batchSize: batchSize)
    }
}

extension BatchWorker {
    /// Runs batches until one comes back short, and waits for what they left in flight:
    /// everything due is done, in the caller's task.
    public func drain(batchSize: Int = 100) async throws {
        while try await runBatch(limit: batchSize, isStopping: { false }) == batchSize {}
        await finish()
    }
}
