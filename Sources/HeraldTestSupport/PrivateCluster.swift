import Foundation

/// A PostgreSQL cluster of its own (`scripts/lib/postgres-cluster.sh`), for a test that crashes
/// the server; the shared cluster of `scripts/test.sh` serves every other test. It keeps its
/// port across restarts, so clients reconnect to the same address.
public final class PrivateCluster: Sendable {
    public let directory: String
    public let port: Int

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-pg-\(UUID().uuidString)").path
        let output = try runLibraryScript("postgres-cluster.sh", ["start", directory])
        guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw CocoaError(
                .executableLoad, userInfo: [NSLocalizedDescriptionKey: "PostgreSQL did not start: \(output)"])
        }
        self.port = port
    }

    /// The libpq connection string for `database` in this cluster.
    public func conninfo(_ database: String) -> String {
        "host=127.0.0.1 port=\(port) user=postgres dbname=\(database)"
    }

    /// Kills the server and every backend with SIGKILL, with no chance to shut down cleanly.
    public func crash() async throws {
        _ = try await onOwnThread { [directory] in try runLibraryScript("postgres-cluster.sh", ["crash", directory]) }
    }

    /// Starts the server again on the same port; it recovers from its WAL first.
    public func restart() async throws {
        _ = try await onOwnThread { [directory, port] in
            try runLibraryScript("postgres-cluster.sh", ["start", directory, "\(port)"])
        }
    }

    deinit {
        _ = try? runLibraryScript("postgres-cluster.sh", ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }
}
