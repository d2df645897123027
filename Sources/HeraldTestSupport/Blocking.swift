import Foundation

/// Runs blocking work (`recv`, a child's `waitUntilExit`, a sleep) on a thread of its own.
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
/// Through files, not pipes, so that a program that writes much never waits for a reader.
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
        let process = try ChildProcess(
            path, arguments, standardInput: standardInput.fileDescriptor, standardOutput: output.fileDescriptor,
            standardError: output.fileDescriptor)
        _ = process.waitUntilExit()
        try output.close()
        try standardInput.close()
        return (process.terminationStatus ?? -1, String(decoding: try Data(contentsOf: outputFile), as: UTF8.self))
    }
}
