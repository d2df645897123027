import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `scripts/lib/<name>` and returns its standard output; its standard error is the test
/// process's. As a `ChildProcess`: the servers these scripts start (PostgreSQL, nginx,
/// PgBouncer) live through the test, and through `system()` they held every descriptor the test
/// process had open then, other tests' connections among them.
func runLibraryScript(_ name: String, _ arguments: [String]) throws -> String {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("script-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: output) }
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    let handle = try FileHandle(forWritingTo: output)
    let script = packageRoot.appendingPathComponent("scripts/lib/\(name)").path
    let child: ChildProcess
    do {
        defer { try? handle.close() }
        child = try ChildProcess(script, arguments, standardOutput: handle.fileDescriptor, standardError: STDERR_FILENO)
    }
    guard child.waitUntilExit(), child.terminationStatus == 0 else {
        let status = child.terminationStatus.map(String.init) ?? "none"
        throw CocoaError(
            .executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(name) \(arguments) failed (status \(status))"])
    }
    return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
}
