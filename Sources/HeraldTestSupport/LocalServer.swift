import FlyingFox
import Foundation

/// A FlyingFox server on a free loopback port, stopped when released.
public final class LocalServer: Sendable {
    public let server: HTTPServer
    public let port: UInt16
    private let task: Task<Void, Never>

    /// Starts a server that answers every request with `handler`.
    public static func start(
        _ handler: @escaping @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> LocalServer {
        let server = HTTPServer(address: try .inet(ip4: "127.0.0.1", port: 0), timeout: 30, logger: .disabled)
        await server.appendRoute("*", handler: handler)
        return try await start(server)
    }

    /// Starts `server`, which must listen on 127.0.0.1.
    public static func start(_ server: HTTPServer) async throws -> LocalServer {
        let task = Task { _ = try? await server.run() }
        // Generous: with the whole suite running on two cores, a start has taken over 5 s.
        try await server.waitUntilListening(timeout: 30)
        guard case .ip4(_, let port)? = await server.listeningAddress else {
            throw CocoaError(.featureUnsupported)
        }
        return LocalServer(server: server, port: port, task: task)
    }

    private init(server: HTTPServer, port: UInt16, task: Task<Void, Never>) {
        self.server = server
        self.port = port
        self.task = task
    }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    deinit { task.cancel() }
}
