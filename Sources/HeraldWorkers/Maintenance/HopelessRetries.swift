import HeraldQueue

/// The retry worker's second pass: deliveries waiting for a retry that can no longer be sent
/// end, `expired` once their notification's expiry passes, `cancelled` once their device is
/// disabled (a dead token another delivery found), rather than waiting for their next claim to
/// find it (`herald.end_hopeless_retries`, the rules ``DeliveryLife`` applies at a claim).
struct HopelessRetries {
    let context: WorkerContext
    /// Rows per statement; a pass repeats until a statement finds fewer.
    static let batchSize = 1000

    func pass(isStopping: @Sendable () -> Bool) async throws {
        while !isStopping() {
            let rows = try await context.connection.query(
                SQL.endHopelessRetries, [context.clock.now(), Self.batchSize])
            var ended = 0
            for row in rows {
                let state: String = try row.decode("state")
                let count: Int = try row.decode("deliveries")
                ended += count
                context.logger.info(
                    "ended deliveries waiting for a retry that could no longer be sent",
                    metadata: ["state": "\(state)", "count": "\(count)"])
                countFinished(kind: WorkerKind.dispatch.rawValue, ["completed": count])
            }
            if ended < Self.batchSize { return }
        }
    }

    enum SQL {
        /// Ends up to $2 deliveries waiting for a retry that can no longer be sent, at $1
        /// (`herald.end_hopeless_retries`, `migrations/functions/retry.sql`), and counts them by state.
        static let endHopelessRetries = "SELECT state, deliveries FROM herald.end_hopeless_retries($1, $2)"
    }
}
