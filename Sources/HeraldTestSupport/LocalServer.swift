import Foundation
import HTTPTypes
import HeraldEmulator
import Hummingbird
import NIOCore

/// An HTTP/1.1 server (Hummingbird) on a free loopback port that answers every request with one
/// closure; stopped when released.
public final class LocalServer: Sendable {
    /// A request as the handler sees it, its body read whole (up to ``maxBodyBytes``; a longer
    /// one is answered 413 without the handler).
    public struct Request: Sendable {
        public var method: String
        /// The path, as sent, without the query.
        public var path: String
        public var headers: [(name: String, value: String)]
        public var body: Data

        /// The value of the header `name` (any case); of one sent more than once, the values
        /// joined by commas.
        public func header(_ name: String) -> String? {
            let values = headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }
    }

    /// The handler's answer, sent with its `Content-Length`.
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: Data

        public init(status: Int, headers: [(name: String, value: String)] = [], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    public static let maxBodyBytes = 1 << 20

    private let server: LoopbackServer
    public var port: UInt16 { server.port }

    /// Starts a server that answers every request with `handler`. A handler that throws, or
    /// answers a header name that is no HTTP token, gets 500.
    public static func start(
        _ handler: @escaping @Sendable (Request) async throws -> Response
    ) async throws -> LocalServer {
        let server = try await LoopbackServer.start(
            CallbackResponder { (request: Hummingbird.Request, _: BasicRequestContext) in
                try await respond(to: request, with: handler)
            })
        return LocalServer(server: server)
    }

    private static func respond(
        to request: Hummingbird.Request, with handler: @Sendable (Request) async throws -> Response
    ) async throws -> Hummingbird.Response {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maxBodyBytes)
        } catch is NIOTooManyBytesError {
            return Hummingbird.Response(status: .contentTooLarge)
        }
        let answer = try await handler(
            Request(
                method: request.method.rawValue, path: request.uri.path,
                headers: request.headers.map { (name: $0.name.rawName, value: $0.value) },
                body: Data(body.readableBytesView)))
        var headers = HTTPFields()
        for (name, value) in answer.headers {
            guard let name = HTTPField.Name(name) else { throw CocoaError(.coderInvalidValue) }
            headers.append(HTTPField(name: name, value: value))
        }
        return Hummingbird.Response(
            status: .init(code: answer.status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    private init(server: LoopbackServer) { self.server = server }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Stops the server: it no longer listens once this returns, and requests in progress are
    /// cancelled.
    public func stop() async { await server.stop() }

    deinit { server.task.cancel() }
}
