/// The work behind one kind of `herald.jobs` row: the reconcile worker's, the diagnostic
/// sleep worker's, or a deployment's own. A ``JobWorker`` claims batches of its kind and
/// records the outcomes. (Ingest and dispatch claim their own tables' rows instead: they are
/// ``BatchWorker``s.)
public protocol JobHandler: Sendable {
    /// The `herald.jobs.kind` this handler works.
    var kind: String { get }
    /// Works a claimed batch and returns an outcome per job id. A job left out of the answer
    /// is released (during shutdown) or retried with an error naming the omission.
    func handle(_ jobs: [Job]) async -> [Int64: JobOutcome]
}
