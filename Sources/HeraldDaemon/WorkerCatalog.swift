import HeraldQueue
import HeraldWorkers

/// What the daemon's configuration says of each worker that has settings of its own.
public struct WorkerSettings: Sendable {
    /// The reconcile worker's wake-up interval and grace; ingest's catch-up messages follow the
    /// same interval.
    public var reconcile = ReconcileWorker.Settings()
    /// How often the retry worker makes a pass (`HERALD_RESCUE_INTERVAL`).
    public var retryInterval = RetryWorker.defaultInterval
    /// `HERALD_PUBLIC_URL`, under which payloads carry a report URL.
    public var publicURL: String?

    public init() {}
}

/// The workers `herald run` can start, by the names used in `HERALD_WORKERS`.
public enum WorkerCatalog {
    public typealias Factory = @Sendable (WorkerContext, WorkerSettings) -> any BatchWorker

    /// Workers started by `HERALD_WORKERS=all`: one per ``WorkerKind``. Ingest and dispatch
    /// claim their own tables' rows; reconcile claims `herald.jobs` rows of its kind; retry
    /// makes a pass every `HERALD_RESCUE_INTERVAL`.
    public static let production: [String: Factory] = Dictionary(
        uniqueKeysWithValues: WorkerKind.allCases.map { ($0.rawValue, factory($0)) })

    static func factory(_ kind: WorkerKind) -> Factory {
        switch kind {
        case .ingest: { IngestWorker(context: $0, catchUpInterval: $1.reconcile.quietPeriod) }
        case .dispatch:
            { DispatchWorker(context: $0, recordWindow: DispatchWorker.recordWindow, publicURL: $1.publicURL) }
        case .reconcile:
            {
                JobWorker(
                    ReconcileWorker(context: $0, settings: $1.reconcile), queue: $0.jobQueue, logger: $0.logger,
                    clock: $0.monotonicClock)
            }
        case .retry: { RetryWorker(context: $0, interval: $1.retryInterval) }
        case .channels:
            { context, _ in
                JobWorker(
                    ChannelWorker(context: context), queue: context.jobQueue, logger: context.logger,
                    clock: context.monotonicClock)
            }
        }
    }

    /// Workers that run only when named.
    public static let diagnostic: [String: Factory] = [
        "sleep": { context, _ in
            JobWorker(SleepWorker(), queue: context.jobQueue, logger: context.logger, clock: context.monotonicClock)
        }
    ]

    /// Whether the configured names run workers of `kind`.
    public static func includes(_ kind: WorkerKind, names: [String]) -> Bool {
        names.contains("all") || names.contains(kind.rawValue)
    }

    /// The factories for the configured names; an unknown name is a configuration error.
    public static func factories(for names: [String]) throws -> [Factory] {
        var factories: [Factory] = []
        for name in names {
            if name == "all" {
                factories += production.keys.sorted().map { production[$0]! }
            } else if let make = production[name] ?? diagnostic[name] {
                factories.append(make)
            } else {
                let known = (["all"] + production.keys.sorted() + diagnostic.keys.sorted()).joined(separator: ", ")
                throw ConfigurationError(
                    setting: "HERALD_WORKERS", message: "names an unknown worker \"\(name)\" (known: \(known))")
            }
        }
        return factories
    }
}
