/// Herald's own workers, by the names used in `HERALD_WORKERS`, metrics, `herald.queue_depth`
/// and the NOTIFY that wakes them. The daemon's catalog switches over these, so a new case is
/// a compile error until it is wired; a test checks the schema's triggers wake only these.
/// (Producers' own `herald.jobs` kinds are any other name.)
public enum WorkerKind: String, Sendable, CaseIterable {
    /// `herald.notifications` → deliveries.
    case ingest
    /// Deliveries → FCM, APNs, Web Push.
    case dispatch
    /// Delivery reports → delivered, and wake-ups (`herald.jobs` rows of this kind).
    case reconcile
    /// What follows a failed or abandoned attempt; it has no queue of its own.
    case retry
    /// Broadcast channels made and deleted at APNs (`herald.jobs` rows of this kind).
    case channels

    /// Whether work of this kind waits in a queue that `herald.queue_depth` counts.
    public var isQueued: Bool { self != .retry }
}
