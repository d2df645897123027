import Logging
import ServiceLifecycle
import Synchronization

/// The loop that feeds one ``BatchWorker``: run a batch, repeat.
///
/// After a full batch it goes again at once, and brings in another loop of its kind that waits
/// (``WakeHub/wakeAnother(kind:)``); otherwise it waits for a NOTIFY (through its
/// ``WakeSignal``, which the ``WakeHub`` signals for one waiting loop) or the poll interval,
/// whichever comes first; when commits come close together, a loop may gather more work first
/// (``Configuration/gather``). The claim size adapts to the load (``BatchSizer``), up to
/// `batchSize`. On graceful shutdown it finishes the batch in hand and stops.
public final class WorkerRunner: Service {
    public struct Configuration: Sendable {
        /// The largest claim (`HERALD_BATCH_SIZE`).
        public var batchSize: Int
        /// The longest wait between claims when no NOTIFY arrives.
        public var pollInterval: Duration
        /// How long a loop whose worker gathers wake-ups (``BatchWorker/gathersWakeUps``) lets
        /// more work arrive before it claims, when the wake-up came less than this after the one
        /// before it (``WakeHub/lastInterval(kind:)``): commits come fast enough that one claim
        /// then takes several, instead of a statement each. Commits further apart are claimed at
        /// once, since waiting would gather nothing. Zero: never.
        public var gather: Duration
        /// After a claim that found nothing, how long a loop lets pass before it claims again for
        /// a wake-up: the wake-ups meanwhile wake nobody else, and that one claim covers them. Any
        /// session may NOTIFY on `herald_jobs`, and a flood of them must not cost a claim each;
        /// a claim that finds work is followed at once as before. Zero: never.
        public var emptyClaimPause: Duration

        public init(
            batchSize: Int, pollInterval: Duration, gather: Duration = .milliseconds(1),
            emptyClaimPause: Duration = .milliseconds(20)
        ) {
            self.batchSize = batchSize
            self.pollInterval = pollInterval
            self.gather = gather
            self.emptyClaimPause = emptyClaimPause
        }
    }

    private let worker: any BatchWorker
    private let hub: WakeHub
    let signal: WakeSignal
    private let configuration: Configuration
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    public let heartbeat: Heartbeat

    public init(worker: any BatchWorker, hub: WakeHub, configuration: Configuration, logger: Logger) {
        self.worker = worker
        self.hub = hub
        self.signal = hub.register(kind: worker.kind)
        heartbeat = Heartbeat(clock: hub.clock)
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
            signal.claiming()
            let claimed: Int
            do {
                claimed = try await worker.runBatch(limit: limit) { [self] in shouldStop }
                errorDelay.reset()
            } catch {
                logger.error("claim failed; retrying", metadata: ["error": "\(error)"])
                heartbeat.idle()
                // The wake-ups this claim was to cover go to a loop that waits for work: the
                // failure may be this loop's connection alone.
                hub.wakeAnother(kind: worker.kind)
                await signal.pause(errorDelay.next())
                continue
            }
            sizer.claimed(claimed)
            if claimed >= limit {
                // A backlog: another loop joins.
                hub.wakeAnother(kind: worker.kind)
            } else {
                heartbeat.idle()
                let foundNothingAt = claimed == 0 ? hub.clock.now : nil
                await signal.wait(timeout: worker.pollInterval ?? configuration.pollInterval)
                if let foundNothingAt, configuration.emptyClaimPause > .zero,
                    foundNothingAt + configuration.emptyClaimPause > hub.clock.now, !shouldStop
                {
                    // Woken soon after a claim that found nothing (a NOTIFY flood, or work
                    // another daemon took): more wake-ups meanwhile wake nobody, and one claim
                    // after the pause covers them.
                    signal.claimComing()
                    await pause(until: foundNothingAt + configuration.emptyClaimPause)
                } else if worker.gathersWakeUps, configuration.gather > .zero,
                    let interval = hub.lastInterval(kind: worker.kind), interval < configuration.gather
                {
                    // More wake-ups meanwhile wake nobody: this claim covers them.
                    signal.claimComing()
                    await pause(until: hub.clock.now + configuration.gather)
                }
            }
        }
        // It claims no more: what it was woken for is left to the other loops' next wake-up
        // or poll, and they are woken again from now on.
        signal.claiming()
        await worker.finish()
        logger.debug("worker stopped")
    }

    /// Lets time pass before the next claim, until `deadline` or a graceful shutdown.
    private func pause(until deadline: ContinuousClock.Instant) async {
        try? await cancelWhenGracefulShutdown { [hub] in try await hub.clock.sleep(until: deadline) }
    }
}
