import Foundation

/// A PostgreSQL cluster of its own (`scripts/lib/postgres-cluster.sh`), for a test that crashes
/// the server or fails over to a standby; the shared cluster of `scripts/test.sh` serves every
/// other test. It keeps its port across restarts, so clients reconnect to the same address.
public final class PrivateCluster: Sendable {
    public let directory: String
    public let port: Int

    public convenience init() throws {
        try self.init(["start"])
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`), running on a port of its own.
    public convenience init(standbyOf primary: PrivateCluster) throws {
        try self.init(["standby", "\(primary.port)"])
    }

    private init(_ command: [String]) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-pg-\(UUID().uuidString)")
            .path
        self.directory = directory
        // A cluster that started but gave no port, or a copy half made, is not left behind.
        do {
            let output = try runLibraryScript("postgres-cluster.sh", [command[0], directory] + command.dropFirst())
            guard let port = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CocoaError(
                    .executableLoad, userInfo: [NSLocalizedDescriptionKey: "PostgreSQL did not start: \(output)"])
            }
            self.port = port
        } catch {
            _ = try? runLibraryScript("postgres-cluster.sh", ["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
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
