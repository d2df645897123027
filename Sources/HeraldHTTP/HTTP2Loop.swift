import CHTTP2
import Foundation
import Logging
import Synchronization

/// A thread that owns one HTTP/2 engine (`herald_h2`: nghttp2 over OpenSSL, on epoll) and sends
/// https requests through it: FCM, OAuth tokens, APNs, Web Push (whose addresses it checks).
///
/// It costs about a third of what libcurl spends on a multiplexed request (libcurl builds and
/// parses each request through layers made for every protocol it speaks, and allocates far
/// more). What the engine does not do is left to ``TransferLoop``: plain http, an egress proxy,
/// and a server that does not offer HTTP/2 (its requests are handed back unsent and sent with
/// libcurl, and so are the origin's later ones).
final class HTTP2Loop: @unchecked Sendable {
    private let engine: OpaquePointer
    private let inbox = LoopInbox()
    private let finished = DispatchSemaphore(value: 0)
    /// How long an idle engine waits: it looks at deadlines and stalls every 20 ms while requests
    /// are out; idle, it only forgets idle origins, for which a second is soon enough.
    private static let idleWait: Int32 = 1000
    private let defaultTimeout: Duration
    /// Sends a request with libcurl: for a server that turned out not to offer HTTP/2.
    private let sendWithoutHTTP2: @Sendable (Transfer) -> Void

    /// nil when the engine cannot start (the CA bundle unreadable, say): libcurl sends everything.
    init?(
        configuration: HTTPClient.Configuration, logger: Logger,
        sendWithoutHTTP2: @escaping @Sendable (Transfer) -> Void
    ) {
        var error = [CChar](repeating: 0, count: 512)
        let made: OpaquePointer? = configuration.caBundle.withOptionalCString { caFile in
            var config = herald_h2_config(
                max_connections_per_origin: Int32(configuration.maxConnectionsPerHost),
                max_connections: Int32(configuration.maxConnections),
                max_streams: Int32(configuration.maxConcurrentStreams),
                connect_timeout_ms: Int(configuration.connectTimeout.milliseconds),
                stall_timeout_ms: Int(configuration.stallTimeout.milliseconds),
                ca_file: caFile)
            return herald_h2_new(&config, h2Completed, &error, error.count)
        }
        guard let made else {
            let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            logger.warning("HTTP/2 engine unavailable (\(reason)); libcurl sends every request")
            return nil
        }
        engine = made
        defaultTimeout = configuration.timeout
        self.sendWithoutHTTP2 = sendWithoutHTTP2
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "herald.http2"
        thread.start()
    }

    func submit(_ transfers: [Transfer]) {
        inbox.submit(transfers) { herald_h2_wakeup(engine) }
    }

    func stop() {
        if inbox.stop(wake: { herald_h2_wakeup(engine) }) { finished.wait() }
    }

    private func run() {
        var fields: [UInt8] = []
        while true {
            let (arrivals, stopping) = inbox.take()
            if stopping {
                arrivals.forEach { $0.complete(.failure(LoopInbox.shutDown)) }
                herald_h2_free(engine)  // fails what is queued or in flight
                return
            }
            for transfer in arrivals { start(transfer, fields: &fields) }
            herald_h2_run(engine, Self.idleWait)
        }
    }

    private func start(_ transfer: Transfer, fields: inout [UInt8]) {
        let request = transfer.request
        fields.removeAll(keepingCapacity: true)
        for header in request.headers {
            fields.append(contentsOf: header.name.utf8)
            fields.append(0)
            fields.append(contentsOf: header.value.utf8)
            fields.append(0)
        }
        let timeout = Int((request.timeout ?? defaultTimeout).milliseconds)
        transfer.sendWithoutHTTP2 = sendWithoutHTTP2
        let context = Unmanaged.passRetained(transfer).toOpaque()
        let certificate = request.clientCertificate
        // Bound first: `certificate?.password.withOptionalCString` would skip the call when nil.
        let certificateFile = certificate?.file
        let certificatePassword = certificate?.password
        request.url.withCString { url in
            request.method.withCString { method in
                fields.withUnsafeBufferPointer { fields in
                    request.body.withUnsafeBufferPointer { body in
                        certificateFile.withOptionalCString { file in
                            certificatePassword.withOptionalCString { password in
                                herald_h2_submit(
                                    engine, url, method,
                                    fields.baseAddress.map { UnsafeRawPointer($0) }?
                                        .assumingMemoryBound(to: CChar.self), fields.count, request.headers.count,
                                    body.baseAddress, body.count, timeout, file, certificate?.format == .p12 ? 1 : 0,
                                    password, request.allowPrivateAddresses ? 0 : 1, context)
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The engine's completion: on the loop's thread, once per request.
private func h2Completed(_ context: UnsafeMutableRawPointer?, _ result: UnsafePointer<herald_h2_result>?) {
    guard let context, let result = result?.pointee else { return }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeRetainedValue()
    let message = result.message.map { String(cString: $0) } ?? ""
    switch result.outcome {
    case HERALD_H2_OK:
        transfer.complete(
            .success(
                HTTPResponse(
                    status: Int(result.status),
                    rawHeaders: Array(UnsafeBufferPointer(start: result.headers, count: result.headers_length)),
                    body: Array(UnsafeBufferPointer(start: result.body, count: result.body_length)),
                    httpVersion: 2, newConnections: Int(result.opened_connection))))
    case HERALD_H2_NOT_HTTP2:
        transfer.sendWithoutHTTP2?(transfer)
    case HERALD_H2_TIMEOUT:
        transfer.complete(.failure(HTTPClientError(kind: .timeout, message: message)))
    case HERALD_H2_CONNECTION:
        transfer.complete(.failure(HTTPClientError(kind: .connection, message: message)))
    case HERALD_H2_REFUSED_ADDRESS:
        transfer.complete(
            .failure(
                .refusedAddress(
                    kind: result.refused_kind, address: result.refused_address.map { String(cString: $0) } ?? "")))
    case HERALD_H2_SHUTDOWN:
        transfer.complete(.failure(HTTPClientError(kind: .shutdown, message: message)))
    case HERALD_H2_SERVER_MISBEHAVED:
        transfer.complete(.failure(HTTPClientError(kind: .serverMisbehaved, message: message)))
    default:
        transfer.complete(.failure(HTTPClientError(kind: .other, message: message)))
    }
}

extension Optional where Wrapped == String {
    /// The string as a C string, or NULL.
    func withOptionalCString<Result>(_ body: (UnsafePointer<CChar>?) throws -> Result) rethrows -> Result {
        switch self {
        case .some(let text): try text.withCString { try body($0) }
        case .none: try body(nil)
        }
    }
}
