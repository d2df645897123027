import CCurl
import CHTTP2
import Foundation
import Logging
import Synchronization

/// libcurl's loops, started on first use: those for requests that may reach any address, and
/// those for requests that may not reach private addresses, whose every socket is checked.
///
/// The two are separate because libcurl reuses connections by host and port: a connection to
/// `10.0.0.5:443` opened for a trusted request would otherwise carry a later request that may
/// not go there, with no socket opened (and checked) for it. Each multi handle has its own
/// connection cache, so on the guarded loops every connection was opened through the check.
/// (`CURLOPT_FRESH_CONNECT` on the trusted side would do it too, at the price of HTTP/2
/// multiplexing.)
final class CurlLoops: Sendable {
    private struct State {
        var trusted: [TransferLoop] = []
        var guarded: [TransferLoop] = []
        /// https origins whose servers did not offer HTTP/2: libcurl sends their requests.
        var withoutHTTP2: Set<Substring> = []
        var stopped = false
    }

    private let configuration: HTTPClient.Configuration
    private let threads: Int
    private let logger: Logger
    private let state = Mutex(State())
    private let anyWithoutHTTP2 = Atomic<Bool>(false)

    init(configuration: HTTPClient.Configuration, threads: Int, logger: Logger) {
        self.configuration = configuration
        self.threads = threads
        self.logger = logger
    }

    func loop(guarded: Bool, turn: Int) -> TransferLoop {
        state.withLock { state in
            if guarded ? state.guarded.isEmpty : state.trusted.isEmpty {
                let loops = (0..<threads).map { _ in
                    TransferLoop(configuration: configuration, guardsAddresses: guarded, logger: logger)
                }
                // Once shut down, a new loop is stopped at once and fails the request as shut down.
                if state.stopped { loops.forEach { $0.stop() } }
                if guarded { state.guarded = loops } else { state.trusted = loops }
            }
            let loops = guarded ? state.guarded : state.trusted
            return loops[turn % loops.count]
        }
    }

    func isWithoutHTTP2(_ origin: Substring) -> Bool {
        anyWithoutHTTP2.load(ordering: .relaxed) && state.withLock { $0.withoutHTTP2.contains(origin) }
    }

    /// For a request the HTTP/2 engine handed back, nothing sent: its server does not offer
    /// HTTP/2, so it and the origin's later requests go to libcurl.
    var sendWithoutHTTP2: @Sendable (Transfer) -> Void {
        { [weak self] transfer in
            guard let self else {
                transfer.complete(.failure(LoopInbox.shutDown))
                return
            }
            let first = state.withLock { $0.withoutHTTP2.insert(transfer.origin).inserted }
            anyWithoutHTTP2.store(true, ordering: .relaxed)
            if first {
                logger.info(
                    "requests to \(transfer.origin) go with libcurl from now on: it does not offer HTTP/2 over TLS, or its URLs are not the HTTP/2 engine's"
                )
            }
            loop(guarded: !transfer.request.allowPrivateAddresses, turn: 0).submit([transfer])
        }
    }

    func stop() {
        let loops = state.withLock { state in
            state.stopped = true
            return state.trusted + state.guarded
        }
        loops.forEach { $0.stop() }
    }
}

/// The thread that owns the multi handle and every easy handle.
final class TransferLoop: @unchecked Sendable {
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    private let configuration: HTTPClient.Configuration
    /// Whether every connection's address is checked (requests that may not reach private addresses).
    private let guardsAddresses: Bool
    private let logger: Logger
    private let inbox = LoopInbox()
    private let finished = DispatchSemaphore(value: 0)
    // Owned by the loop thread.
    private let multi: UnsafeMutableRawPointer
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    /// Transfers of one origin: submitted but not yet handed to libcurl (oldest first, read
    /// from `head`), and how many are with libcurl.
    private struct OriginQueue {
        var waiting: [Transfer] = []
        var head = 0
        var active = 0
    }

    /// Per origin, so that a server that stops answering holds only its own transfers: its
    /// streams fill up to `originLimit` and the rest of its requests wait here, while every
    /// other origin's go on (one shared queue would put them behind the stuck ones).
    private var origins: [Substring: OriginQueue] = [:]
    /// Origins with transfers waiting.
    private var waitingOrigins: Set<Substring> = []
    /// At most this many transfers per origin with libcurl: its connections' streams. libcurl
    /// 7.88 can stall transfers that it parks itself while waiting for a free stream.
    private var originLimit: Int { configuration.maxConnectionsPerHost * configuration.maxConcurrentStreams }
    private var activeLimit: Int { configuration.maxConnections * configuration.maxConcurrentStreams }
    /// The multi handle's sockets, corked while `curl_multi_perform` writes (see `perform()`)
    /// and watched for stalls (see `checkConnections()`).
    private let sockets = UnsafeMutablePointer<herald_socket_set>.allocate(capacity: 1)
    /// The handle `checkConnections()` PINGs the multi handle's HTTP/2 connections with.
    private let upkeep: UnsafeMutableRawPointer
    /// When `checkConnections()` next looks (ms, `monotonicMilliseconds()`).
    private var nextCheck: Int64 = 0
    /// How often it looks, and how long the poll may wait: a quarter of the stall limit, at
    /// most a second.
    private let checkInterval: Int64
    /// The local ports of the connections the last check shut down: the transfers that fail on
    /// them are told why.
    private var stalledPorts: Set<Int> = []

    init(configuration: HTTPClient.Configuration, guardsAddresses: Bool, logger: Logger) {
        _ = Self.globalInit
        self.configuration = configuration
        self.guardsAddresses = guardsAddresses
        self.logger = logger
        if herald_curl_version_number() < 0x08_00_00 {
            logger.warning(
                "libcurl \(String(cString: herald_curl_version_text())) is older than 8.0; it can lose multiplexed HTTP/2 transfers under load"
            )
        }
        sockets.initialize(to: herald_socket_set())
        multi = curl_multi_init()
        herald_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        herald_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        herald_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        herald_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams)
        checkInterval =
            configuration.stallTimeout > .zero ? max(10, min(1000, configuration.stallTimeout.milliseconds / 4)) : 1000
        // Added with no URL, it fails at the first pass and stays in the multi handle, finished
        // (its message is skipped: it has no transfer), so that upkeep visits this multi
        // handle's connections.
        upkeep = curl_easy_init()!
        curl_multi_add_handle(multi, upkeep)
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = guardsAddresses ? "herald.http.guarded" : "herald.http"
        thread.start()
    }

    func submit(_ transfers: [Transfer]) {
        inbox.submit(transfers) { curl_multi_wakeup(multi) }
    }

    func stop() {
        if inbox.stop(wake: { curl_multi_wakeup(multi) }) { finished.wait() }
    }

    private func run() {
        while true {
            let (arrivals, stopping) = inbox.take()
            if stopping {
                let error = LoopInbox.shutDown
                for queue in origins.values { queue.waiting[queue.head...].forEach { $0.complete(.failure(error)) } }
                arrivals.forEach { $0.complete(.failure(error)) }
                origins.removeAll()
                for transfer in active.values {
                    if let easy = transfer.easy {
                        curl_multi_remove_handle(multi, easy)
                        curl_easy_cleanup(easy)
                    }
                    transfer.complete(.failure(error))
                }
                active.removeAll()
                idleHandles.forEach { curl_easy_cleanup($0) }
                curl_multi_remove_handle(multi, upkeep)
                curl_easy_cleanup(upkeep)
                curl_multi_cleanup(multi)
                sockets.deallocate()
                return
            }
            for transfer in arrivals {
                origins[transfer.origin, default: OriginQueue()].waiting.append(transfer)
                waitingOrigins.insert(transfer.origin)
            }
            startQueued()
            perform()
            collectFinished()
            if configuration.stallTimeout > .zero {
                let now = monotonicMilliseconds()
                if now >= nextCheck {
                    nextCheck = now + checkInterval
                    if checkConnections(now: now) {
                        // The stalled connections' streams fail now, before new transfers are
                        // started (none may be put on a stalled connection meanwhile).
                        perform()
                        collectFinished()
                    }
                }
            }
            // Completions made room for queued transfers. libcurl times new transfers to run at
            // once, so the poll returns without waiting and the next pass sends them.
            startQueued()
            curl_multi_poll(multi, nil, 0, Int32(checkInterval), nil)
        }
    }

    /// Runs every transfer as far as it can go without waiting.
    ///
    /// libcurl sends each HTTP/2 stream's frames with a write of their own. Corking the sockets
    /// for the pass lets the kernel send them as a few full segments at the end instead, which
    /// roughly halves the system's cost per request (and the server's).
    private func perform() {
        var running: Int32 = 0
        herald_socket_set_cork(sockets, 1)
        curl_multi_perform(multi, &running)
        herald_socket_set_cork(sockets, 0)
    }

    /// Gives up connections that stopped answering; returns whether it shut any down.
    ///
    /// A connection whose TCP path dies, or whose server stops answering while its kernel
    /// still acknowledges, looks healthy to libcurl: every stream on it waits for its timeout,
    /// and new streams keep being multiplexed onto it for as long as it stays open (a stream
    /// timing out leaves its HTTP/2 connection open). So the loop watches each connection's
    /// byte counters (`herald_socket_set_sample`): an HTTP/2 connection that has had something
    /// to answer for half of `stallTimeout` gets a PING, through `curl_easy_upkeep` (libcurl's
    /// only way to send one); if it then receives nothing for the other half, its socket is
    /// shut down. libcurl reads the end of it at the next pass: the streams on it fail as
    /// connection errors (or, for a stream that got nothing back on a reused connection, are
    /// sent again on a fresh one), the connection is closed, and new streams go to a new one.
    ///
    /// The kernel's own means see less: TCP keepalive and `TCP_USER_TIMEOUT` notice a dead path
    /// only, not a stuck server, and keepalive only on an idle connection. A dead path is found
    /// here too: nothing comes back. libcurl 8.14 writes an upkeep PING only with the
    /// connection's next write, so an idle connection cannot be checked this way: one that died
    /// idle is found when a request is put on it (TCP keepalive finds a dead path before that).
    private func checkConnections(now: Int64) -> Bool {
        let half = configuration.stallTimeout.milliseconds / 2
        if herald_socket_set_sample(sockets, now, half) > 0 {
            // Queues a PING on every HTTP/2 connection of the loop (a handful; upkeep cannot pick
            // one), so that each one asked about below surely has one queued now.
            herald_easy_upkeep_every(upkeep, 0)
            herald_socket_set_ask_pings(sockets, now, half)
        }
        var peer = [CChar](repeating: 0, count: 64)
        var ports = [Int](repeating: 0, count: 16)
        let shut = herald_socket_set_shut_stalled(sockets, now, half, &peer, peer.count, &ports, Int32(ports.count))
        stalledPorts = Set(ports.prefix(Int(shut)).filter { $0 != 0 })
        if shut > 0 {
            let address = String(decoding: peer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            logger.warning(
                "HTTP/2 connection to \(address) stopped answering (nothing received in \(half) ms after a PING); closed it: its requests fail as connection errors, and new ones open a fresh connection",
                metadata: shut > 1 ? ["connections": "\(shut)"] : [:])
        }
        return shut > 0
    }

    /// Hands waiting transfers to libcurl, each origin's while it has fewer than `originLimit`
    /// with libcurl, and all of them while fewer than `activeLimit`.
    private func startQueued() {
        for origin in waitingOrigins {
            guard active.count < activeLimit else { return }
            guard var queue = origins[origin] else { continue }
            while queue.head < queue.waiting.count && queue.active < originLimit && active.count < activeLimit {
                start(queue.waiting[queue.head])
                queue.head += 1
                queue.active += 1
            }
            if queue.head == queue.waiting.count {
                queue.waiting.removeAll(keepingCapacity: true)
                queue.head = 0
                waitingOrigins.remove(origin)
            }
            origins[origin] = queue
        }
    }

    /// A new easy handle with the options every transfer shares. Handles are reused without
    /// `curl_easy_reset`, so only per-transfer options are set again.
    private func makeEasyHandle() -> UnsafeMutableRawPointer {
        let easy = curl_easy_init()!
        herald_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        herald_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        herald_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // Only http and https, and no redirects: a push service's 3xx is an answer to classify,
        // and following one would take a request (with its Authorization) wherever it says.
        herald_easy_restrict_protocols(easy)
        herald_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds))
        if let caBundle = configuration.caBundle { herald_easy_setopt_string(easy, CURLOPT_CAINFO, caBundle) }
        herald_easy_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, bodyCallback)
        herald_easy_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback)
        herald_easy_enable_ssl_read_ahead(easy)
        herald_easy_track_sockets(easy, sockets)
        herald_easy_tcp_keepalive(easy, 30, 10, 3)
        return easy
    }

    private func start(_ transfer: Transfer) {
        let easy = idleHandles.popLast() ?? makeEasyHandle()
        let pointer = Unmanaged.passUnretained(transfer).toOpaque()
        let request = transfer.request
        herald_easy_setopt_string(easy, CURLOPT_URL, request.url)
        let timeout = request.timeout ?? configuration.timeout
        herald_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout.milliseconds))
        herald_easy_setopt_pointer(easy, CURLOPT_PRIVATE, pointer)
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(to: 0)
        transfer.errorBuffer = errorBuffer
        herald_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        herald_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, pointer)
        herald_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, pointer)
        if guardsAddresses {
            let addressGuard = UnsafeMutablePointer<herald_address_guard>.allocate(capacity: 1)
            addressGuard.initialize(to: herald_address_guard())
            addressGuard.pointee.easy = easy
            transfer.addressGuard = addressGuard
            herald_easy_guard_addresses(easy, addressGuard)
        }
        // Handles are reused: a request without a certificate clears the last one's.
        let certificate = request.clientCertificate
        herald_easy_setopt_string(easy, CURLOPT_SSLCERT, certificate?.file)
        herald_easy_setopt_string(easy, CURLOPT_SSLCERTTYPE, certificate?.format.rawValue)
        herald_easy_setopt_string(easy, CURLOPT_SSLKEY, certificate?.format == .pem ? certificate?.file : nil)
        herald_easy_setopt_string(easy, CURLOPT_KEYPASSWD, certificate?.password)

        switch request.method {
        case "GET":
            herald_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "POST":
            herald_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, nil)
        default:
            herald_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
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
        transfer.easy = easy
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
            origins[transfer.origin]?.active -= 1
            if let queue = origins[transfer.origin], queue.active == 0, queue.waiting.isEmpty {
                origins[transfer.origin] = nil
            }
            var status = 0
            var version = 0
            var connects = 0
            herald_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            herald_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
            herald_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
            if version >= Int(CURL_HTTP_VERSION_2_0) {
                // Its connection carries HTTP/2, so the stall check may PING it. Any transfer
                // tells, not only the one that opened it, which may be the one that stalls.
                herald_easy_mark_http2(easy, sockets)
            }
            // Did it fail because its connection was shut down as stalled?
            let stalled = code != CURLE_OK && !stalledPorts.isEmpty && stalledPorts.contains(localPort(easy))
            curl_multi_remove_handle(multi, easy)
            if idleHandles.count < 1024 {
                idleHandles.append(easy)
            } else {
                curl_easy_cleanup(easy)
            }

            if let overflow = transfer.overflow {
                transfer.complete(.failure(HTTPClientError(kind: .serverMisbehaved, message: overflow)))
            } else if code == CURLE_OK {
                transfer.complete(
                    .success(
                        HTTPResponse(
                            status: status, rawHeaders: transfer.headerBlock, body: transfer.body,
                            httpVersion: version >= Int(CURL_HTTP_VERSION_2_0) ? 2 : 1, newConnections: connects)))
            } else if code == CURLE_COULDNT_CONNECT, let addressGuard = transfer.addressGuard,
                addressGuard.pointee.refused_kind != HERALD_ADDRESS_PUBLIC
            {
                // No address could be connected to, and at least one was refused (a name may
                // resolve to a public and a private address: then the public one was tried).
                transfer.complete(.failure(Self.refusal(addressGuard.pointee)))
            } else if stalled {
                // Its connection was shut down as stalled: say so, rather than libcurl's word
                // for a connection that ended.
                transfer.complete(
                    .failure(
                        HTTPClientError(
                            kind: .connection, curlCode: Int(code.rawValue),
                            message:
                                "the connection stopped answering (nothing received for \(configuration.stallTimeout), not even an answer to a PING) and was closed; the request may be sent again"
                        )))
            } else {
                transfer.complete(.failure(Self.error(code, transfer.errorBuffer!)))
            }
        }
    }

    private func localPort(_ easy: UnsafeMutableRawPointer) -> Int {
        var port = 0
        herald_easy_getinfo_long(easy, CURLINFO_LOCAL_PORT, &port)
        return port
    }

    /// The failure of a transfer none of whose addresses it could connect to, some refused.
    private static func refusal(_ addressGuard: herald_address_guard) -> HTTPClientError {
        var copy = addressGuard
        let address = withUnsafeBytes(of: &copy.refused_address) {
            String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
        }
        return .refusedAddress(
            kind: addressGuard.refused_kind, address: address, curlCode: Int(CURLE_COULDNT_CONNECT.rawValue))
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
        case CURLE_WEIRD_SERVER_REPLY: kind = .serverMisbehaved
        default: kind = .other
        }
        return HTTPClientError(kind: kind, curlCode: Int(code.rawValue), message: message)
    }
}

/// libcurl hands the response body here, chunk by chunk. Past the cap, answering less than it
/// was handed makes libcurl end the transfer (CURLE_WRITE_ERROR), and nothing more is kept.
private func bodyCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let data, let context else { return length }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if transfer.body.count + length > Int(HERALD_MAX_RESPONSE_BODY) {
        transfer.overflow = "the response's body exceeds 1 MiB"
        return 0
    }
    data.withMemoryRebound(to: UInt8.self, capacity: length) {
        transfer.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

/// libcurl hands each header line here; a status line starts a new block (after a 100 Continue).
private func headerCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let data, let context else { return length }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    if transfer.headerBlock.count + length > Int(HERALD_MAX_RESPONSE_HEADERS) {
        transfer.overflow = "the response's header fields exceed 64 KiB"
        return 0
    }
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

/// A monotonic clock in milliseconds (not wall time, which can jump).
private func monotonicMilliseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
}
