import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
/// For waiting on another process or thread, where no signal can be awaited.
public func eventually(
    timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// The package's root folder, found from this file's path.
public let packageRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The `herald` executable that `swift build` produced beside the tests.
public var heraldExecutable: URL {
    if let path = ProcessInfo.processInfo.environment["HERALD_BINARY"] { return URL(fileURLWithPath: path) }
    let candidates = [
        Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("herald"),
        Bundle.main.bundleURL.appendingPathComponent("herald"),
        packageRoot.appendingPathComponent(".build/debug/herald"),
    ]
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[2]
}
