import CCurl
import Foundation
import Logging
import Synchronization

/// An async HTTP client over the libcurl multi interface.
///
/// One dedicated thread drives every transfer (`curl_multi_perform` + `curl_multi_poll`);
/// callers `await` their response. HTTPS requests use HTTP/2 and are multiplexed as streams
/// over a few connections (`CURLPIPE_MULTIPLEX`, `PIPEWAIT`), which stay open for reuse.
/// Plain `http://` requests use HTTP/1.1 with keep-alive. A cancelled task's request still
/// runs to completion or its timeout.
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Connections per host; with HTTP/2 each carries many streams. Default 4.
        public var maxConnectionsPerHost: Int = 4
        /// Connections in all. Default 16.
        public var maxConnections: Int = 16
        /// Streams per HTTP/2 connection, at most (the server's own limit also applies). Default 200.
        public var maxConcurrentStreams: Int = 200
        /// Time limit for a request that names none. Default 30 s.
        public var timeout: Duration = .seconds(30)
        public var connectTimeout: Duration = .seconds(10)
        /// A PEM file of trusted CA certificates, instead of the system's (for a TLS stand-in).
        public var caBundle: String?

        public init() {}
    }

    private let loop: TransferLoop

    public init(configuration: Configuration = Configuration(), logger: Logger = Logger(label: "herald.http")) {
        loop = TransferLoop(configuration: configuration, logger: logger)
    }

    deinit { loop.stop() }

    /// Sends a request and waits for its response.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await withCheckedThrowingContinuation { continuation in
            loop.submit(Transfer(request: request, continuation: continuation))
        }
    }

    /// Fails what is still queued or in flight and stops the transfer thread.
    public func shutdown() { loop.stop() }
}

/// One request in flight: its easy handle's callbacks write here.
final class Transfer: @unchecked Sendable {
    // Touched only on the loop thread after submission.
    let request: HTTPRequest
    let continuation: CheckedContinuation<HTTPResponse, any Error>
    var body: [UInt8] = []
    var headerBlock: [UInt8] = []
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    init(request: HTTPRequest, continuation: CheckedContinuation<HTTPResponse, any Error>) {
        self.request = request
        self.continuation = continuation
        errorBuffer.initialize(to: 0)
    }

    deinit {
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }
}

/// The thread that owns the multi handle and every easy handle.
final class TransferLoop: @unchecked Sendable {
    private struct Inbox {
        var waiting: [Transfer] = []
        var stopping = false
        var stopped = false
    }

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    private let configuration: HTTPClient.Configuration
    private let logger: Logger
    private let inbox = Mutex(Inbox())
    private let finished = DispatchSemaphore(value: 0)
    // Owned by the loop thread.
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []

    init(configuration: HTTPClient.Configuration, logger: Logger) {
        _ = Self.globalInit
        self.configuration = configuration
        self.logger = logger
        multi = curl_multi_init()
        herald_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        herald_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        herald_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        herald_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams)
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "herald.http"
        thread.start()
    }

    func submit(_ transfer: Transfer) {
        let accepted = inbox.withLock { inbox -> Bool? in
            if inbox.stopping { return nil }
            inbox.waiting.append(transfer)
            return inbox.waiting.count == 1
        }
        switch accepted {
        case nil:
            transfer.continuation.resume(
                throwing: HTTPClientError(kind: .shutdown, curlCode: 0, message: "the HTTP client was shut down"))
        case true?:
            // Only the first waiting transfer needs to wake the loop; it takes all of them.
            curl_multi_wakeup(multi)
        case false?:
            break
        }
    }

    func stop() {
        let first = inbox.withLock { inbox -> Bool in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard first else { return }
        curl_multi_wakeup(multi)
        finished.wait()
    }

    private func run() {
        while true {
            let (arrivals, stopping) = inbox.withLock { inbox in
                defer { inbox.waiting.removeAll(keepingCapacity: true) }
                return (inbox.waiting, inbox.stopping)
            }
            if stopping {
                let error = HTTPClientError(kind: .shutdown, curlCode: 0, message: "the HTTP client was shut down")
                arrivals.forEach { $0.continuation.resume(throwing: error) }
                for (pointer, transfer) in active {
                    if let easy = easyHandle(for: pointer) {
                        curl_multi_remove_handle(multi, easy)
                        curl_easy_cleanup(easy)
                    }
                    transfer.continuation.resume(throwing: error)
                }
                active.removeAll()
                idleHandles.forEach { curl_easy_cleanup($0) }
                curl_multi_cleanup(multi)
                return
            }
            arrivals.forEach(start)
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectFinished()
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }

    private var easyByTransfer: [UnsafeMutableRawPointer: UnsafeMutableRawPointer] = [:]

    private func easyHandle(for pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? { easyByTransfer[pointer] }

    private func start(_ transfer: Transfer) {
        let easy = idleHandles.popLast() ?? curl_easy_init()!
        let pointer = Unmanaged.passUnretained(transfer).toOpaque()
        let request = transfer.request
        herald_easy_setopt_string(easy, CURLOPT_URL, request.url)
        herald_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        herald_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        herald_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        let timeout = request.timeout ?? configuration.timeout
        herald_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout.milliseconds))
        herald_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        if let caBundle = configuration.caBundle { herald_easy_setopt_string(easy, CURLOPT_CAINFO, caBundle) }
        herald_easy_setopt_pointer(easy, CURLOPT_PRIVATE, pointer)
        herald_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        herald_easy_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, bodyCallback)
        herald_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, pointer)
        herald_easy_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback)
        herald_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, pointer)

        switch request.method {
        case "GET": herald_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "POST": break
        default: herald_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if request.method != "GET" {
            herald_easy_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            // COPYPOSTFIELDS copies the body, so the request need not outlive this call.
            var body = request.body
            if body.isEmpty { body = [0] }
            body.withUnsafeMutableBytes { _ = herald_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
        }
        // "Expect:" turns off the 100-continue round trip curl would add to larger HTTP/1.1 bodies.
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Expect:")
        for header in request.headers { list = curl_slist_append(list, "\(header.name): \(header.value)") }
        transfer.headerList = list
        herald_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list)

        active[pointer] = transfer
        easyByTransfer[pointer] = easy
        curl_multi_add_handle(multi, easy)
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var privateData: UnsafeMutableRawPointer?
            herald_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &privateData)
            guard let pointer = privateData, let transfer = active.removeValue(forKey: pointer) else { continue }
            easyByTransfer[pointer] = nil
            var status = 0
            var version = 0
            var connects = 0
            herald_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            herald_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            herald_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
            curl_multi_remove_handle(multi, easy)
            if idleHandles.count < 256 {
                curl_easy_reset(easy)
                idleHandles.append(easy)
            } else {
                curl_easy_cleanup(easy)
            }

            if code == CURLE_OK {
                transfer.continuation.resume(
                    returning: HTTPResponse(
                        status: status, rawHeaders: transfer.headerBlock, body: transfer.body,
                        httpVersion: version >= Int(CURL_HTTP_VERSION_2_0) ? 2 : 1, newConnections: connects))
            } else {
                transfer.continuation.resume(throwing: Self.error(code, transfer.errorBuffer))
            }
        }
    }

    private static func error(_ code: CURLcode, _ buffer: UnsafePointer<CChar>) -> HTTPClientError {
        var message = String(cString: buffer)
        if message.isEmpty { message = String(cString: curl_easy_strerror(code)) }
        let kind: HTTPClientError.Kind
        switch code {
        case CURLE_OPERATION_TIMEDOUT: kind = .timeout
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR, CURLE_SEND_ERROR,
            CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_PEER_FAILED_VERIFICATION:
            kind = .connection
        default: kind = .other
        }
        return HTTPClientError(kind: kind, curlCode: Int(code.rawValue), message: message)
    }
}

/// libcurl hands the response body here, chunk by chunk.
private func bodyCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let data, let context else { return length }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    data.withMemoryRebound(to: UInt8.self, capacity: length) {
        transfer.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

/// libcurl hands each header line here; a status line starts a new block (after a 100 Continue).
private func headerCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let data, let context else { return length }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
        let line = UnsafeBufferPointer(start: bytes, count: length)
        if line.starts(with: "HTTP/".utf8) {
            transfer.headerBlock.removeAll(keepingCapacity: true)
        } else {
            transfer.headerBlock.append(contentsOf: line)
        }
    }
    return length
}

extension Duration {
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
