import HeraldCore
import HeraldPostgres
import Synchronization

/// The routes of `herald.routes`, by name, and the push types of `herald.push_types`, by their
/// payload kinds: read before a loop's first claim, and again before the claim after one named a
/// route not read yet (a migration added it since).
final class RouteCatalog: Sendable {
    struct Contents: Sendable {
        var routes: [String: OutgoingDelivery.Route] = [:]
        var pushTypes: [OutgoingDelivery.PayloadKind: String] = [:]
    }

    private let state = Mutex<(contents: Contents, stale: Bool)>((Contents(), true))

    /// What the tables hold, read again first if it is stale.
    func contents(connection: PostgresConnection) async throws -> Contents {
        if state.withLock({ $0.stale }) {
            let routes = try await connection.query(SQL.routes).map { row in
                OutgoingDelivery.Route(
                    name: try row.decode("route"), provider: try row.decode("provider"),
                    description: try row.decode("description"),
                    scopes: try row.decode("scopes", as: [String].self).map(ConfigurationScope.init(rawValue:)))
            }
            let pushTypes = try await connection.query(SQL.pushTypes).map { row in
                (
                    OutgoingDelivery.PayloadKind(rawValue: try row.decode("payload_kind")),
                    try row.decode("push_type", as: String.self)
                )
            }
            let read = Contents(
                routes: Dictionary(uniqueKeysWithValues: routes.map { ($0.name, $0) }),
                pushTypes: Dictionary(uniqueKeysWithValues: pushTypes))
            state.withLock { $0 = (read, false) }
        }
        return state.withLock { $0.contents }
    }

    /// A claim named a route not read yet: read them again before the next claim.
    func markStale() { state.withLock { $0.stale = true } }

    enum SQL {
        static let routes = "SELECT route, provider, description, scopes FROM herald.routes"
        static let pushTypes = "SELECT payload_kind, push_type FROM herald.push_types"
    }
}
