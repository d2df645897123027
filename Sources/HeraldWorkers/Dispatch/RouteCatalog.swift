import HeraldCore
import HeraldPostgres
import Synchronization

/// The routes of `herald.routes`, by name, read before a loop's first claim, and again before
/// the claim after one named a route not read yet (a migration added it since).
final class RouteCatalog: Sendable {
    private let state = Mutex<(routes: [String: OutgoingDelivery.Route], stale: Bool)>(([:], true))

    /// The routes, read again first if they are stale.
    func routes(connection: PostgresConnection) async throws -> [String: OutgoingDelivery.Route] {
        if state.withLock({ $0.stale }) {
            let read = try await connection.query(SQL.routes).map { row in
                OutgoingDelivery.Route(
                    name: try row.decode("route"), provider: try row.decode("provider"),
                    description: try row.decode("description"),
                    scopes: try row.decode("scopes", as: [String].self).map(ConfigurationScope.init(rawValue:)))
            }
            state.withLock { $0 = (Dictionary(uniqueKeysWithValues: read.map { ($0.name, $0) }), false) }
        }
        return state.withLock { $0.routes }
    }

    /// A claim named a route not read yet: read them again before the next claim.
    func markStale() { state.withLock { $0.stale = true } }

    enum SQL {
        static let routes = "SELECT route, provider, description, scopes FROM herald.routes"
    }
}
