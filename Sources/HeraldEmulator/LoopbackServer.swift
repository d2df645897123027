import Foundation
import Hummingbird
import Logging

/// A Hummingbird server running on a port it was given (0: a free one) until its task is
/// cancelled: the emulator, and the tests' local servers (`LocalServer`).
public struct LoopbackServer: Sendable {
    public let task: Task<Void, Never>
    public let port: UInt16

    /// Starts `responder` on `host`:`port` and returns once it listens, with the port it bound; or
    /// throws why it could not start (the address in use…).
    public static func start<Responder: HTTPResponder>(
        _ responder: Responder, host: String = "127.0.0.1", port: UInt16 = 0
    ) async throws -> LoopbackServer
    where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let (bound, listening) = AsyncThrowingStream.makeStream(of: Int.self)
        let app = Application(
            responder: responder,
            configuration: .init(address: .hostname(host, port: Int(port))),
            onServerRunning: { channel in
                listening.yield(channel.localAddress?.port ?? 0)
                listening.finish()
            },
            logger: Logger(label: "herald-loopback-server", factory: { _ in SwiftLogNoOpLogHandler() }))
        let task = Task {
            do {
                try await app.run()
                listening.finish()
            } catch {
                listening.finish(throwing: error)
            }
        }
        var boundPort: Int?
        do {
            for try await port in bound { boundPort = port }
        } catch {
            task.cancel()
            throw error
        }
        guard let boundPort, let port = UInt16(exactly: boundPort), port != 0 else {
            task.cancel()
            throw CocoaError(.featureUnsupported)
        }
        return LoopbackServer(task: task, port: port)
    }

    /// Stops the server: it no longer listens once this returns, and requests in progress are
    /// cancelled.
    public func stop() async {
        task.cancel()
        await task.value
    }
}
