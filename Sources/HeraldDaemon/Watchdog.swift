import HeraldQueue
import Logging
import ServiceLifecycle

/// Tells systemd that the daemon is ready, and keeps its watchdog fed while every worker
/// loop is alive: a loop that has been in one batch longer than the watchdog interval (stuck,
/// or wedged) stops the pings, and systemd restarts the daemon. A loop waiting for work is
/// alive however long it waits. Its leased work is taken over once its leases end.
struct Watchdog: Service {
    let notifier: SystemdNotifier
    let heartbeats: [Heartbeat]
    let logger: Logger

    func run() async throws {
        notifier.notify("READY=1\nSTATUS=running \(heartbeats.count) worker loops")
        guard let interval = notifier.watchdogInterval else {
            try? await gracefulShutdown()
            notifier.notify("STOPPING=1")
            return
        }
        var warned = false
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let stalest = heartbeats.map(\.age).max() ?? .zero
            if stalest < interval {
                notifier.notify("WATCHDOG=1")
                warned = false
            } else if !warned {
                logger.critical(
                    "a worker loop has not come round in \(stalest); withholding the systemd watchdog ping")
                warned = true
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval / 2) }
        }
        notifier.notify("STOPPING=1")
    }
}
