/// The work behind one job kind. Herald's workers (ingest, dispatch, reconcile, retry)
/// each provide one; the ``WorkerRunner`` claims batches and records the outcomes.
public protocol JobHandler: Sendable {
    /// The `herald.jobs.kind` this handler works.
    var kind: String { get }
    /// Works a claimed batch and returns an outcome per job id. A job left out of the answer
    /// is released (during shutdown) or retried with an error naming the omission.
    func handle(_ jobs: [Job]) async -> [Int64: JobOutcome]
}
