import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The real `herald` binary running as a child process, for tests that send it signals
/// or kill it outright.
public final class HeraldProcess: @unchecked Sendable {
    public let process: ChildProcess
    private let logFile: URL

    /// Starts `herald` (or another product built beside it, such as `herald-emulator`)
    /// with `arguments`; `environment` is added to this process's own.
    public init(_ arguments: [String], environment: [String: String] = [:], executable: String = "herald") throws {
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("herald-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let log = try FileHandle(forWritingTo: logFile)
        defer { try? log.close() }
        // Any free ports for the HTTP endpoints, so daemons started side by side do not collide.
        let ports = ["HERALD_HTTP_ADDRESS": "127.0.0.1:0", "HERALD_METRICS_ADDRESS": "127.0.0.1:0"]
        process = try ChildProcess(
            heraldExecutable.deletingLastPathComponent().appendingPathComponent(executable).path, arguments,
            environment: ProcessInfo.processInfo.environment.merging(ports.merging(environment) { $1 }) { $1 },
            standardOutput: log.fileDescriptor, standardError: log.fileDescriptor)
    }

    /// Runs `herald` (or `executable`) to completion and returns its exit status and output.
    public static func run(
        _ arguments: [String], environment: [String: String] = [:], executable: String = "herald",
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, output: String) {
        let child = try HeraldProcess(arguments, environment: environment, executable: executable)
        guard await child.waitForExit(timeout: timeout) else {
            child.send(SIGKILL)
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "herald \(arguments) did not exit"])
        }
        return (child.process.terminationStatus ?? -1, child.output)
    }

    /// Everything the process wrote to standard output and standard error so far.
    public var output: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    public func send(_ signal: Int32) { process.send(signal) }

    /// Waits for the process to end; returns false if it is still running after `timeout`.
    public func waitForExit(timeout: Duration) async -> Bool { await process.waitForExit(timeout: timeout) }

    deinit {
        if process.isRunning { process.send(SIGKILL) }
        try? FileManager.default.removeItem(at: logFile)
    }
}
