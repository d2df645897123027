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
public func runProgram(_ path: String, _ arguments: [String], input: Data? = nil) async throws -> (
    status: Int32, output: String
) {
    try await onOwnThread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        let standardInput = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = standardInput
        try process.run()
        if let input { standardInput.fileHandleForWriting.write(input) }
        try standardInput.fileHandleForWriting.close()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }
}
