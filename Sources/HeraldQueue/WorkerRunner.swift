import Logging
import ServiceLifecycle
import Synchronization

/// The loop that feeds one ``BatchWorker``: run a batch, repeat.
///
/// After a full batch it goes again at once, and brings in another loop of its kind that waits
/// (``WakeHub/wakeAnother(kind:)``); otherwise it waits for a NOTIFY (through its
/// ``WakeSignal``, which the ``WakeHub`` signals for one waiting loop) or the poll interval,
/// whichever comes first. The claim size adapts to the load (``BatchSizer``), up to
/// `batchSize`. On graceful shutdown it finishes the batch in hand and stops.
public final class WorkerRunner: Service {
    public struct Configuration: Sendable {
        /// The largest claim (`HERALD_BATCH_SIZE`).
        public var batchSize: Int
        /// The longest wait between claims when no NOTIFY arrives.
        public var pollInterval: Duration

        public init(batchSize: Int, pollInterval: Duration) {
            self.batchSize = batchSize
            self.pollInterval = pollInterval
        }
    }

    private let worker: any BatchWorker
    private let hub: WakeHub
    let signal: WakeSignal
    private let configuration: Configuration
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    public let heartbeat = Heartbeat()

    public init(worker: any BatchWorker, hub: WakeHub, configuration: Configuration, logger: Logger) {
        self.worker = worker
        self.hub = hub
        self.signal = hub.register(kind: worker.kind)
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "kind"] = "\(worker.kind)"
        self.logger = logger
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await loop()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.signal.signal()
        }
    }

    private var shouldStop: Bool { stopping.load(ordering: .relaxed) || Task.isCancelled }

    private func loop() async {
        var errorDelay = RetryDelay()
        var sizer = BatchSizer(cap: configuration.batchSize)
        while !shouldStop {
            heartbeat.beat()
            let limit = sizer.limit
            let claimed: Int
            do {
                claimed = try await worker.runBatch(limit: limit) { [self] in shouldStop }
                errorDelay.reset()
            } catch {
                logger.error("claim failed; retrying", metadata: ["error": "\(error)"])
                heartbeat.idle()
                await signal.pause(errorDelay.next())
                continue
            }
            sizer.claimed(claimed)
            if claimed >= limit {
                // A backlog: another loop joins.
                hub.wakeAnother(kind: worker.kind)
            } else {
                heartbeat.idle()
                await signal.wait(timeout: worker.pollInterval ?? configuration.pollInterval)
            }
        }
        await worker.finish()
        logger.debug("worker stopped")
    }
}
