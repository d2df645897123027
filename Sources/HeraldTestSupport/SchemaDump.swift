import Foundation

/// A database's schema as text, to compare two databases whole.
public enum SchemaDump {
    /// The schema as pg_dump prints it, without the lines that name versions or carry a random
    /// key (`\restrict`), so the same schema always gives the same text: two databases' dumps are
    /// compared whole (`MigratorTests`). Without the generations' partitions unless asked: they
    /// differ between databases of different ages.
    public static func dump(_ database: String, generations: Bool = false) async throws -> String {
        let bundled = "/usr/lib/postgresql/15/bin/pg_dump"
        // The generations' partitions come and go (migrations 020 and 022): the parents say what
        // they are.
        let (status, output) = try await runProgram(
            FileManager.default.isExecutableFile(atPath: bundled) ? bundled : "/usr/bin/pg_dump",
            ["--schema-only", "--no-owner", "--schema=herald"]
                + (generations
                    ? []
                    : [
                        "--exclude-table=herald.notifications_g[0-9]*", "--exclude-table=herald.deliveries_g[0-9]*",
                        "--exclude-table=herald.delivery_reports_g[0-9]*",
                    ]) + [database])
        guard status == 0 else { throw Failure("pg_dump exited \(status): \(output)") }
        return output.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in
                !line.hasPrefix("-- Dumped ") && !line.hasPrefix("\\restrict") && !line.hasPrefix("\\unrestrict")
            }
            .joined(separator: "\n")
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public static func firstDifference(_ a: String, _ b: String) -> String? {
        let left = a.split(separator: "\n", omittingEmptySubsequences: false)
        let right = b.split(separator: "\n", omittingEmptySubsequences: false)
        for index in 0..<max(left.count, right.count) {
            let l = index < left.count ? String(left[index]) : "(end)"
            let r = index < right.count ? String(right[index]) : "(end)"
            if l != r { return "line \(index + 1): \"\(l)\" vs \"\(r)\"" }
        }
        return nil
    }
}
