import Foundation
import Logging
import Synchronization
import Testing

@testable import HeraldQueue

/// A stall is named where an operator looks: the daemon's log (`herald status` has its own tests).
@Suite struct StallTests {
    /// Keeps what is logged through it.
    final class Captured: Sendable {
        let entries = Mutex<[(Logger.Level, String, Logger.Metadata)]>([])
        var logger: Logger {
            Logger(label: "test") { _ in Handler(captured: self) }
        }
        struct Handler: LogHandler {
            let captured: Captured
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) {
                captured.entries.withLock { $0.append((event.level, "\(event.message)", event.metadata ?? [:])) }
            }
        }
    }

    @Test func aStatementFarSlowerThanItsBatchIsLoggedWithItsDurationAndRows() {
        let captured = Captured()
        let timer = StatementTimer(kind: "dispatch", .claim)
        timer.finished(took: .milliseconds(20), rows: 500, logger: captured.logger)
        #expect(captured.entries.withLock { $0.isEmpty })
        timer.finished(took: .seconds(3), rows: 500, logger: captured.logger)
        let entries = captured.entries.withLock { $0 }
        #expect(entries.count == 1)
        let (level, message, metadata) = try! #require(entries.first)
        #expect(level == .warning)
        #expect(message.contains("a slow dispatch claim"))
        #expect(metadata["rows"] == "500")
        #expect(Double("\(metadata["seconds"] ?? "0")") ?? 0 >= 3)
    }
}
