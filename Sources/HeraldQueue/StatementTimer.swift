import Foundation
import HeraldCore
import Logging
import Metrics

/// Times one of a worker's statements over a batch (its claim, or the record of its outcomes):
/// `herald_claim_duration_seconds` or `herald_record_duration_seconds`, labelled with the
/// worker's kind, and a warning in the log for one slower than ``slow``, with its duration and
/// rows. A batch's statement runs in milliseconds; one that takes a second is a plan gone wrong,
/// a lock held, or a server out of breath, and each later batch pays it too, so it is named as it
/// happens rather than found later in a backlog.
public struct StatementTimer: Sendable {
    /// Far past what any batch's statement needs: claims and records take milliseconds
    /// (docs/benchmarks.md), so a second is a stall, not a busy moment.
    public static let slow: Duration = .seconds(1)

    public enum Statement: String, Sendable {
        case claim, record
    }

    private let kind: String
    private let statement: Statement
    private let timer: Metrics.Timer

    public init(kind: String, _ statement: Statement) {
        self.kind = kind
        self.statement = statement
        timer = Metrics.Timer(label: "herald_\(statement.rawValue)_duration_seconds", dimensions: [("kind", kind)])
    }

    /// Records a statement that just ended, having taken `took` and worked `rows` rows.
    public func finished(took: Duration, rows: Int, logger: Logger) {
        timer.record(duration: took)
        guard took > Self.slow else { return }
        logger.warning(
            "a slow \(kind) \(statement.rawValue): a batch's statement should take milliseconds",
            metadata: [
                "statement": "\(statement.rawValue)", "seconds": "\(String(format: "%.3f", took.seconds))",
                "rows": "\(rows)",
            ])
    }
}
