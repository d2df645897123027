import Foundation

/// A PgBouncer of its own in session mode (`scripts/lib/pgbouncer.sh`), in front of one server,
/// for the test that runs Herald through a pooler while the database fails over behind it.
public final class PgBouncer: Sendable {
    public let directory: String
    public let port: Int

    /// Starts it in front of the PostgreSQL server on 127.0.0.1:`serverPort`.
    public init(serverPort: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-pgb-\(UUID().uuidString)")
            .path
        self.directory = directory
        let output = try runLibraryScript("pgbouncer.sh", ["start", directory, "\(serverPort)"])
        guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            _ = try? runLibraryScript("pgbouncer.sh", ["stop", directory])
            throw CocoaError(
                .executableLoad, userInfo: [NSLocalizedDescriptionKey: "PgBouncer did not start: \(output)"])
        }
        self.port = port
    }

    /// The libpq connection string for `database` through the pooler.
    public func conninfo(_ database: String) -> String {
        "host=127.0.0.1 port=\(port) user=postgres dbname=\(database)"
    }

    /// Points it at another server and reloads it, as an operator's failover hook does.
    public func repoint(to serverPort: Int) async throws {
        _ = try await onOwnThread { [directory] in
            try runLibraryScript("pgbouncer.sh", ["repoint", directory, "\(serverPort)"])
        }
    }

    deinit {
        _ = try? runLibraryScript("pgbouncer.sh", ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }
}
