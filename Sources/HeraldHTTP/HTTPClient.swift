import CCurl
import Foundation
import Logging
import Synchronization

/// An async HTTP client: https through Herald's HTTP/2 engine, the rest through libcurl.
///
/// HTTPS requests go as HTTP/2 streams multiplexed over a few connections per origin, which
/// stay open for reuse, sent by the engine (``HTTP2Loop``: nghttp2 over OpenSSL, on threads of
/// its own). libcurl's multi interface (``TransferLoop``) sends plain `http://` requests
/// (HTTP/1.1 with keep-alive), every request when an egress proxy is configured, and those of
/// a server that does not offer HTTP/2. Callers `await` their response; a cancelled task's
/// request still runs to completion or its timeout.
///
/// Requests are checked before either engine sees them: a CR, LF or other control character in
/// the URL or a header, or a header name that is not a token, fails the request alone with
/// ``HTTPClientError/Kind/invalidRequest``. Only http and https are spoken, and redirects are
/// never followed (a 3xx is returned as it is). Requests that may not reach private addresses
/// (``HTTPRequest/allowPrivateAddresses`` false) travel over connections of their own, each
/// address checked before it is connected to.
public final class HTTPClient: Sendable {
    public struct Configuration: Sendable {
        /// Connections per host; with HTTP/2 each carries many streams. Default 4.
        public var maxConnectionsPerHost: Int = 4
        /// Connections in all, divided among the threads. Requests whose addresses are checked
        /// (Web Push) and the others each have this many, so neither takes the other's room.
        /// Default 16.
        public var maxConnections: Int = 16
        /// Streams per HTTP/2 connection, at most (the server's own limit also applies). Default 100.
        ///
        /// At most `maxConnectionsPerHost × maxConcurrentStreams` requests per origin (and
        /// `maxConnections × maxConcurrentStreams` in all) are in flight at once; the rest wait
        /// in the client's own queue, per origin, so a server that stops answering holds back
        /// only its own requests. (libcurl 7.88 can stall transfers that it parks itself while
        /// waiting for a free stream.)
        public var maxConcurrentStreams: Int = 100
        /// Time limit for a request that names none. Default 30 s.
        public var timeout: Duration = .seconds(30)
        public var connectTimeout: Duration = .seconds(10)
        /// How long an HTTP/2 connection may keep requests waiting without a byte before it is
        /// given up for dead. Default 5 s; zero turns the check off.
        ///
        /// A connection that has had something to answer for half this long without receiving
        /// anything gets an HTTP/2 PING; if nothing at all arrives in the other half, it is
        /// closed: the requests on it fail at once as connection errors (which the providers'
        /// clients retry; libcurl may resend them on a fresh connection), and later requests open
        /// a fresh connection. A server that is merely slow still answers the PING, so it is left
        /// alone. HTTP/1.1 connections are not judged: there is no PING to tell a slow server
        /// from a stuck one, and each carries one request, which its own timeout bounds. (libcurl's
        /// loops read the kernel's TCP counters for it: Linux only.)
        public var stallTimeout: Duration = .seconds(5)
        /// A PEM file of trusted CA certificates, instead of the system's (for a TLS stand-in).
        public var caBundle: String?
        /// Event-loop threads, each with its own share of the connections (one thread's rate:
        /// docs/benchmarks.md, "The HTTP client"). Default 2, or 1 on a single core.
        ///
        /// libcurl gets as many loops again, started on its first request, and as many more for
        /// its requests that may not reach private addresses, with the same connection limits.
        public var threads: Int = min(2, ProcessInfo.processInfo.activeProcessorCount)
        /// Whether https requests go through the HTTP/2 engine. False sends every request through
        /// libcurl, as behind an egress proxy: `herald-bench http --libcurl` compares the two.
        public var usesHTTP2Engine = true

        public init() {}
    }

    /// The HTTP/2 engine's loops, for https requests; none behind an
    /// egress proxy (libcurl speaks to proxies) or when the engine cannot start.
    private let http2Loops: [HTTP2Loop]
    /// libcurl's loops, for everything else.
    private let curl: CurlLoops
    private let next = Atomic<Int>(0)

    public init(configuration: Configuration = Configuration(), logger: Logger = Logger(label: "herald.http")) {
        var perLoop = configuration
        let threads = max(1, configuration.threads)
        perLoop.maxConnectionsPerHost = max(1, configuration.maxConnectionsPerHost / threads)
        perLoop.maxConnections = max(1, configuration.maxConnections / threads)
        let curl = CurlLoops(configuration: perLoop, threads: threads, logger: logger)
        self.curl = curl
        if let proxy = Self.egressProxy() {
            logger.info("requests go through the egress proxy \(proxy) with libcurl")
            http2Loops = []
        } else if !configuration.usesHTTP2Engine {
            http2Loops = []
        } else {
            var loops: [HTTP2Loop] = []
            for _ in 0..<threads {
                guard
                    let loop = HTTP2Loop(
                        configuration: perLoop, logger: logger, sendWithoutHTTP2: curl.sendWithoutHTTP2)
                else { break }
                loops.append(loop)
            }
            http2Loops = loops
        }
    }

    deinit { shutdown() }

    /// The proxy libcurl would send https requests through (`https_proxy`, `all_proxy`, in either
    /// case), with its credentials left out.
    private static func egressProxy() -> String? {
        let environment = ProcessInfo.processInfo.environment
        for name in ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            if let value = environment[name], !value.isEmpty {
                return value.split(separator: "@").last.map(String.init) ?? value
            }
        }
        return nil
    }

    /// Sends a request and waits for its response.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        if let error = request.invalidity { throw error }
        return try await withCheckedThrowingContinuation { continuation in
            submit([Transfer(request: request) { continuation.resume(with: $0) }])
        }
    }

    /// Sends requests concurrently and waits for all of them; results come in request order.
    ///
    /// This is the hot path's form: one hand-over to the transfer thread and one wake-up of the
    /// caller per batch, instead of one per request. An invalid request fails alone, at once.
    public func send(_ requests: [HTTPRequest]) async -> [Result<HTTPResponse, HTTPClientError>] {
        guard !requests.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            let collector = BatchCollector(count: requests.count, continuation: continuation)
            var transfers: [Transfer] = []
            transfers.reserveCapacity(requests.count)
            for (index, request) in requests.enumerated() {
                if let error = request.invalidity {
                    collector.record(.failure(error), at: index)
                    continue
                }
                transfers.append(Transfer(request: request) { collector.record($0, at: index) })
            }
            submit(transfers)
        }
    }

    /// Hands transfers to the loops that send them: the HTTP/2 engine's, or libcurl's.
    private func submit(_ transfers: [Transfer]) {
        let turn = next.add(1, ordering: .relaxed).oldValue
        var http2: [Transfer] = []
        var trusted: [Transfer] = []
        var restricted: [Transfer] = []
        for transfer in transfers {
            if !http2Loops.isEmpty && transfer.request.url.utf8.starts(with: "https://".utf8)
                && !curl.isWithoutHTTP2(transfer.origin)
            {
                http2.append(transfer)
            } else if transfer.request.allowPrivateAddresses {
                trusted.append(transfer)
            } else {
                restricted.append(transfer)
            }
        }
        if !http2.isEmpty { http2Loops[turn % http2Loops.count].submit(http2) }
        if !trusted.isEmpty { curl.loop(guarded: false, turn: turn).submit(trusted) }
        if !restricted.isEmpty { curl.loop(guarded: true, turn: turn).submit(restricted) }
    }

    /// Fails what is still queued or in flight and stops the transfer threads.
    public func shutdown() {
        http2Loops.forEach { $0.stop() }
        curl.stop()
    }
}

/// Gathers a batch's results and resumes the caller once, at the end. Results come from the
/// caller's thread (requests refused before sending) and from the loops' threads.
final class BatchCollector: Sendable {
    private struct State {
        var results: [Result<HTTPResponse, HTTPClientError>?]
        var remaining: Int
    }

    private let state: Mutex<State>
    private let continuation: CheckedContinuation<[Result<HTTPResponse, HTTPClientError>], Never>

    init(count: Int, continuation: CheckedContinuation<[Result<HTTPResponse, HTTPClientError>], Never>) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count))
        self.continuation = continuation
    }

    func record(_ result: Result<HTTPResponse, HTTPClientError>, at index: Int) {
        let finished = state.withLock { state -> [Result<HTTPResponse, HTTPClientError>]? in
            state.results[index] = result
            state.remaining -= 1
            return state.remaining == 0 ? state.results.map { $0! } : nil
        }
        if let finished { continuation.resume(returning: finished) }
    }
}

/// One request in flight, in either engine; the fields after `sendWithoutHTTP2` are libcurl's
/// (its easy handle's callbacks write here).
final class Transfer: @unchecked Sendable {
    // Touched only on the loop thread after submission.
    let request: HTTPRequest
    let complete: (Result<HTTPResponse, HTTPClientError>) -> Void
    /// `scheme://host[:port]`: transfers wait for room per origin.
    let origin: Substring
    /// Set by the HTTP/2 engine's loop: sends the transfer with libcurl instead.
    var sendWithoutHTTP2: (@Sendable (Transfer) -> Void)?
    var body: [UInt8] = []
    var headerBlock: [UInt8] = []
    /// Why the response was cut off: it brought more than a response may
    /// (`HERALD_MAX_RESPONSE_HEADERS`, `HERALD_MAX_RESPONSE_BODY`, as the HTTP/2 engine caps).
    var overflow: String?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// The easy handle carrying this transfer, once started.
    var easy: UnsafeMutableRawPointer?
    /// libcurl's words for a failure, once the transfer is with libcurl.
    var errorBuffer: UnsafeMutablePointer<CChar>?
    /// On a loop that guards addresses: what the transfer may reach, and what it was refused.
    var addressGuard: UnsafeMutablePointer<herald_address_guard>?

    init(request: HTTPRequest, complete: @escaping (Result<HTTPResponse, HTTPClientError>) -> Void) {
        self.request = request
        self.complete = complete
        origin = HTTPRequest.origin(of: request.url)
    }

    deinit {
        curl_slist_free_all(headerList)
        errorBuffer?.deallocate()
        addressGuard?.deallocate()
    }
}

/// What callers hand a loop's thread (either engine's): transfers waiting to be taken, and
/// whether to stop.
///
/// Wake-ups happen under the lock: once the loop has seen `stopping`, it frees what a wake-up
/// touches (libcurl's multi handle, the engine's eventfd), so none may come after that.
final class LoopInbox: Sendable {
    private struct State {
        var waiting: [Transfer] = []
        var stopping = false
    }

    private let state = Mutex(State())

    /// Queues transfers for the loop, waking it if none were waiting (it takes all of them). Once
    /// the loop is stopping, fails them as shut down instead.
    func submit(_ transfers: [Transfer], wake: () -> Void) {
        let accepted = state.withLock { state -> Bool in
            if state.stopping { return false }
            if state.waiting.isEmpty { wake() }
            state.waiting.append(contentsOf: transfers)
            return true
        }
        if !accepted { transfers.forEach { $0.complete(.failure(Self.shutDown)) } }
    }

    /// Tells the loop to stop; false if it was told already.
    func stop(wake: () -> Void) -> Bool {
        state.withLock { state in
            guard !state.stopping else { return false }
            state.stopping = true
            wake()
            return true
        }
    }

    /// What waits, taken, and whether the loop is to stop.
    func take() -> (arrivals: [Transfer], stopping: Bool) {
        state.withLock { state in
            defer { state.waiting.removeAll(keepingCapacity: true) }
            return (state.waiting, state.stopping)
        }
    }

    static let shutDown = HTTPClientError(kind: .shutdown, message: "the HTTP client was shut down")
}

extension Duration {
    var milliseconds: Int64 {
        let parts = components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
