import Foundation

/// A pg_auto_failover formation of its own (`scripts/lib/auto-failover.sh`): a monitor and two
/// nodes with synchronous replication, on localhost, for the tests that fail over under load.
public final class AutoFailoverFormation: Sendable {
    public let directory: String
    /// The formation's multi-host URI (`pg_autoctl show uri`), database `herald`, with
    /// `target_session_attrs=read-write`, as operators give it to their applications.
    public let uri: String

    public init() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-paf-\(UUID().uuidString)")
            .path
        self.directory = directory
        do {
            let printed = try runLibraryScript("auto-failover.sh", ["create", directory])
            guard let uri = printed.split(separator: "\n").last.map(String.init), uri.hasPrefix("postgres://") else {
                throw CocoaError(
                    .executableLoad, userInfo: [NSLocalizedDescriptionKey: "no formation URI in: \(printed)"])
            }
            // The nodes' superuser: postgres when the script ran them as postgres (as root).
            self.uri = uri + "&user=" + (geteuid() == 0 ? "postgres" : NSUserName())
        } catch {
            _ = try? runLibraryScript("auto-failover.sh", ["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// The port of the node that takes writes now, or nil during a failover.
    public func primaryPort() async -> Int? {
        (try? await onOwnThread { [directory] in try runLibraryScript("auto-failover.sh", ["primary", directory]) })
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// SIGKILLs the primary's keeper and postmaster at once (its backends exit as they see the
    /// postmaster gone, closing their sockets).
    public func killPrimary() async throws {
        _ = try await onOwnThread { [directory] in
            try runLibraryScript("auto-failover.sh", ["kill-primary", directory])
        }
    }

    /// Returns once one node is primary and the other a secondary in step with it: until then the
    /// primary commits without its standby (pg_auto_failover's `wait_primary`), and what it
    /// committed is lost with it.
    public func waitStable() async throws {
        _ = try await onOwnThread { [directory] in
            try runLibraryScript("auto-failover.sh", ["wait-stable", directory])
        }
    }

    /// A planned switchover (`pg_autoctl perform switchover`); returns once it is done.
    public func switchover() async throws {
        _ = try await onOwnThread { [directory] in try runLibraryScript("auto-failover.sh", ["switchover", directory]) }
    }

    deinit {
        _ = try? runLibraryScript("auto-failover.sh", ["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }
}
