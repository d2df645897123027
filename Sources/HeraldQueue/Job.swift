import HeraldCore

/// A job claimed from `herald.jobs`, leased to this process until it is finished.
public struct Job: Sendable, Equatable {
    public var id: Int64
    public var kind: String
    /// The row the job is about, when there is one.
    public var ref: Int64?
    /// The job's JSON payload, as text.
    public var payload: String
    /// Attempts so far, this one included.
    public var attempts: Int
    public var maxAttempts: Int

    public init(
        id: Int64, kind: String, ref: Int64?, payload: String = "{}", attempts: Int = 1,
        maxAttempts: Int = Backoff.maxAttempts
    ) {
        self.id = id
        self.kind = kind
        self.ref = ref
        self.payload = payload
        self.attempts = attempts
        self.maxAttempts = maxAttempts
    }

    /// `true` when a failure now would be the last one allowed.
    public var isLastAttempt: Bool { attempts >= maxAttempts }
}

/// What became of a claimed job.
public enum JobOutcome: Sendable, Equatable {
    /// Done: the row leaves the queue.
    case completed
    /// Failed for now: try again after the backoff, or later if `notBefore` says so (a
    /// server's `Retry-After`). The last allowed attempt goes dead instead.
    case retry(error: String, notBefore: Duration? = nil)
    /// Failed for good: dead at once, with the reason, whatever the attempts left.
    case dead(reason: String)
    /// Not attempted (something outside the job is not ready): run again after `by`, and the
    /// claim does not count as an attempt.
    case postpone(by: Duration, reason: String)
}

extension Array where Element == Job {
    /// The rows these jobs are about. A job without one can never succeed, so its outcome is
    /// `dead` at once, with a reason naming what it lacks (`what`: "notification", "report", …).
    public func refs(naming what: String) -> (refs: [Int64], dead: [Int64: JobOutcome]) {
        var refs: [Int64] = []
        var dead: [Int64: JobOutcome] = [:]
        for job in self {
            if let ref = job.ref {
                refs.append(ref)
            } else {
                dead[job.id] = .dead(reason: "\(job.kind) job \(job.id) names no \(what) (ref is NULL)")
            }
        }
        return (refs, dead)
    }
}
