import Foundation
import HeraldPostgres
import Synchronization

/// The setups of the apps a dispatch loop sends for, by app, with the version of the row they
/// were read from (its xmin, which every change to the row renews). A claim returns each
/// delivery's app version; only apps whose version is new are read again, in one statement.
final class AppSetups: Sendable {
    private let cache = Mutex<[String: (version: String, setup: AppSetup)]>([:])

    func setups(_ versions: [String: String], connection: PostgresConnection) async throws -> [String: AppSetup] {
        let stale = cache.withLock { cache in versions.filter { cache[$0.key]?.version != $0.value }.map(\.key) }
        if !stale.isEmpty {
            let rows = try await connection.query(DispatchWorker.SQL.appSetups, [stale])
            let read = try rows.map { row in
                (
                    version: try row.decode("app_version", as: String.self),
                    setup: AppSetup(
                        appID: try row.decode("app_id"),
                        providerSettings: try Self.providerSettings(row.decode("provider_settings")))
                )
            }
            cache.withLock { cache in for entry in read { cache[entry.setup.appID] = entry } }
        }
        return cache.withLock { cache in versions.keys.reduce(into: [:]) { $0[$1] = cache[$1]?.setup } }
    }

    /// `{"provider": {…its row…}}`, split by provider. Keys sorted, so that an unchanged row is
    /// the same bytes each time it is read (``Senders`` makes a route again only when they differ).
    static func providerSettings(_ json: String) throws -> [String: Data] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return [:] }
        return try object.mapValues { try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]) }
    }
}
