import Foundation

/// Runs blocking work (`recv`, `waitUntilExit`, a sleep) on a thread of its own.
///
/// Swift concurrency runs every test on as many threads as there are cores, two here, so a
/// test that blocks one of them stalls unrelated tests and makes their timing flaky.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result(catching: work)) }.start()
    }
}

/// Runs a program to completion and returns its exit status and its output, standard error
/// included, with `input` written to its standard input.
///
/// Through files, not pipes: a child another test starts at the same moment inherits this
/// process's open descriptors, and a pipe's write end held by it gives no end of file for as
/// long as it lives (a daemon under test: minutes). The suite once hung on that for good.
public func runProgram(_ path: String, _ arguments: [String], input: Data? = nil) async throws -> (
    status: Int32, output: String
) {
    try await onOwnThread {
        let directory = FileManager.default.temporaryDirectory
        let outputFile = directory.appendingPathComponent("herald-program-\(UUID().uuidString).out")
        let inputFile = directory.appendingPathComponent("herald-program-\(UUID().uuidString).in")
        defer {
            try? FileManager.default.removeItem(at: outputFile)
            try? FileManager.default.removeItem(at: inputFile)
        }
        _ = FileManager.default.createFile(atPath: outputFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inputFile.path, contents: input ?? Data())
        let output = try FileHandle(forWritingTo: outputFile)
        let standardInput = try FileHandle(forReadingFrom: inputFile)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = output
        process.standardInput = standardInput
        try process.run()
        process.waitUntilExit()
        try output.close()
        try standardInput.close()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: outputFile), as: UTF8.self))
    }
}
