import HeraldQueue

/// The workers `herald run` can start, by the names used in `HERALD_WORKERS`.
public enum WorkerCatalog {
    /// Workers started by `HERALD_WORKERS=all`. The ingest, dispatch, reconcile and retry
    /// workers register here as they are built.
    public static let production: [String: @Sendable () -> any JobHandler] = [:]

    /// Workers that run only when named.
    public static let diagnostic: [String: @Sendable () -> any JobHandler] = [
        "sleep": { SleepWorker() }
    ]

    /// The handlers for the configured names; an unknown name is a configuration error.
    public static func handlers(for names: [String]) throws -> [any JobHandler] {
        var handlers: [any JobHandler] = []
        for name in names {
            if name == "all" {
                handlers += production.keys.sorted().map { production[$0]!() }
            } else if let make = production[name] ?? diagnostic[name] {
                handlers.append(make())
            } else {
                let known = (["all"] + production.keys.sorted() + diagnostic.keys.sorted()).joined(separator: ", ")
                throw ConfigurationError(
                    setting: "HERALD_WORKERS", message: "names an unknown worker \"\(name)\" (known: \(known))")
            }
        }
        return handlers
    }
}
