import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `scripts/lib/<name>` and returns its standard output. It uses `system()`: Foundation's
/// `Process` on Linux never sees a script exit once a server it started has daemonized.
func runLibraryScript(_ name: String, _ arguments: [String]) throws -> String {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("script-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: output) }
    let script = packageRoot.appendingPathComponent("scripts/lib/\(name)").path
    let command = ([script] + arguments).map { "'\($0)'" }.joined(separator: " ") + " > '\(output.path)'"
    guard system(command) == 0 else {
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(command) failed"])
    }
    return (try? String(contentsOf: output, encoding: .utf8)) ?? ""
}
