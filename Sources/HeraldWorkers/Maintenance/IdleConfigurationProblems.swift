/// The retry worker's third pass: an app's configuration problem that nothing waits on any more
/// is cleared, so `herald.app_problems` and `herald status` stop reporting it. While deliveries
/// wait on it, a probe confirms it every minute; one unconfirmed for five minutes is checked
/// against the queued deliveries whose route needs it (`herald.clear_idle_config_problems`).
struct IdleConfigurationProblems {
    let context: WorkerContext

    func pass() async throws {
        let cleared = try await context.connection.query(SQL.clearIdleProblems, [context.clock.now()])[0]
            .decode(0, as: Int.self)
        if cleared > 0 {
            context.logger.info(
                "cleared configuration problems that no delivery waits on any more", metadata: ["count": "\(cleared)"])
        }
    }

    enum SQL {
        /// Clears, at $1, the configuration problems nothing waits on (`herald.clear_idle_config_problems`,
        /// `migrations/functions/retry.sql`).
        static let clearIdleProblems = "SELECT herald.clear_idle_config_problems($1)"
    }
}
