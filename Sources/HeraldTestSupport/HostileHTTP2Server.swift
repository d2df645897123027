import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTP/2 server over TLS that breaks the protocol on purpose. It writes its frames by hand,
/// byte by byte, so that no library stands between a malformed frame and the client: what a
/// push service anyone can run (a Web Push endpoint, a UnifiedPush distributor) could send.
public final class HostileHTTP2Server: Sendable {
    public enum Attack: String, CaseIterable, Sendable {
        /// A response's HEADERS followed by CONTINUATION frames without end.
        case continuationFlood
        /// One large header field added to the decoder's dynamic table, then referenced by
        /// thousands of one-byte fields: 20 KiB on the wire, 64 MB decoded.
        case hpackBomb
        /// A complete header block of 70 KiB, past the 64 KiB the client advertises.
        case oversizedHeaderBlock
        /// A 200 whose body never ends, sent as fast as flow control allows.
        case endlessData
        /// `:status: 2000`.
        case statusNotThreeDigits
        /// PING frames without end from the first moment, their acknowledgements ignored.
        case pingFlood
        /// SETTINGS frames without end, their acknowledgements ignored.
        case settingsFlood
        /// Every request's stream reset as refused (REFUSED_STREAM), for ever.
        case refusedEveryStream
        /// RST_STREAM frames without end for streams the client never opened.
        case resetsForUnopenedStreams
        /// A GOAWAY on every connection before it carries anything, and again for each request.
        case goawayLoop
        /// A TCP connection accepted whose TLS handshake is never answered.
        case handshakeNeverCompletes
        /// Streams given a flow-control window of zero that never opens. A request whose body
        /// went out before the server's SETTINGS came is answered; the next ones can send no
        /// body. PINGs are answered, so the connection looks alive.
        case windowNeverOpens
        /// The server's SETTINGS, then 64 KiB of bytes that are no frames at all.
        case garbageAfterPreface
    }

    public let attack: Attack
    public let port: Int
    /// The certificate to trust (it names 127.0.0.1 and localhost).
    public let caBundle: String
    private let channel: any Channel
    private let accepted: ConnectionCount

    /// Connections accepted so far.
    public var connections: Int { accepted.value.load(ordering: .relaxed) }
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    private init(attack: Attack, port: Int, caBundle: String, channel: any Channel, accepted: ConnectionCount) {
        self.attack = attack
        self.port = port
        self.caBundle = caBundle
        self.channel = channel
        self.accepted = accepted
    }

    public static func start(_ attack: Attack) async throws -> HostileHTTP2Server {
        let identity = try await Identity.shared()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(identity.certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: identity.key, format: .pem)))
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let accepted = ConnectionCount()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.value.add(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    if attack != .handshakeNeverCompletes {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.addHandler(Handler(attack: attack))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HostileHTTP2Server(
            attack: attack, port: channel.localAddress?.port ?? 0, caBundle: identity.certificate, channel: channel,
            accepted: accepted)
    }

    public func stop() async {
        try? await channel.close()
    }

    /// A key and a self-signed certificate, made once for every server of the run.
    private struct Identity: Sendable {
        let certificate: String
        let key: String

        private static let made = Mutex<Task<Identity, any Error>?>(nil)

        static func shared() async throws -> Identity {
            let task = made.withLock { task in
                if let task { return task }
                let made = Task { try await make() }
                task = made
                return made
            }
            return try await task.value
        }

        private static func make() async throws -> Identity {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "herald-hostile-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let identity = Identity(
                certificate: directory.appendingPathComponent("cert.pem").path,
                key: directory.appendingPathComponent("key.pem").path)
            let result = try await runProgram(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout",
                    identity.key, "-out", identity.certificate,
                ])
            guard result.status == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: result.output])
            }
            return identity
        }
    }
}

extension HostileHTTP2Server.Attack {
    /// Whether the attack breaks HTTP/2's rules or a response's limits, which Herald's client
    /// reports as the server having misbehaved; the others are within the rules (refusals,
    /// GOAWAYs, silence, a window left shut) and fail as a connection that did not serve.
    public var breaksTheRules: Bool {
        switch self {
        case .refusedEveryStream, .goawayLoop, .handshakeNeverCompletes, .windowNeverOpens: false
        default: true
        }
    }

    /// Words of the reason Herald's HTTP client gives a request this attack failed. A handshake
    /// never answered ends at a timeout, whose words depend on the client's settings: empty.
    public var reason: String {
        switch self {
        case .continuationFlood: "Too many CONTINUATION frames"
        case .hpackBomb, .oversizedHeaderBlock: "the response's header fields exceed 64 KiB"
        case .endlessData: "the response's body exceeds 1 MiB"
        case .statusNotThreeDigits: "the server's response broke HTTP/2's rules"
        case .pingFlood, .settingsFlood: "Flooding was detected"
        case .refusedEveryStream, .goawayLoop: "the server refused the request 5 times"
        case .resetsForUnopenedStreams: "PROTOCOL_ERROR: RST_STREAM: stream in idle"
        case .handshakeNeverCompletes: ""
        case .garbageAfterPreface: "FRAME_SIZE_ERROR"
        case .windowNeverOpens: "the server's flow-control window left no room for the request's body"
        }
    }
}

/// Connections accepted, counted by the bootstrap's initializer and read by the tests.
private final class ConnectionCount: Sendable {
    let value = Atomic<Int>(0)
}

/// One connection of the server: reads the client's frames, answers what keeps the connection
/// going (its SETTINGS and PINGs), and attacks.
private final class Handler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let attack: HostileHTTP2Server.Attack
    private var input = ByteBuffer()
    private var prefaceSeen = false
    /// What the flood under way writes next; nil while it waits (for a window to open).
    private var flood: (() -> [UInt8]?)?
    private var pumping = false
    /// Flow control, for the endless body: the connection's window and the stream's.
    private var connectionWindow = 65_535
    private var initialStreamWindow = 65_535
    private var streamWindows: [UInt32: Int] = [:]

    init(attack: HostileHTTP2Server.Attack) {
        self.attack = attack
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard attack != .handshakeNeverCompletes else { return }
        var bytes = unwrapInboundIn(data)
        input.writeBuffer(&bytes)
        if !prefaceSeen {
            guard input.readableBytes >= 24 else { return }
            input.moveReaderIndex(forwardBy: 24)  // PRI * HTTP/2.0…
            prefaceSeen = true
            started(context)
        }
        while input.readableBytes >= 9, let head = input.getBytes(at: input.readerIndex, length: 9) {
            let length = Int(head[0]) << 16 | Int(head[1]) << 8 | Int(head[2])
            guard input.readableBytes >= 9 + length else { break }
            let stream = UInt32(head[5] & 0x7f) << 24 | UInt32(head[6]) << 16 | UInt32(head[7]) << 8 | UInt32(head[8])
            let payload = input.getBytes(at: input.readerIndex + 9, length: length) ?? []
            input.moveReaderIndex(forwardBy: 9 + length)
            received(context, type: head[3], flags: head[4], stream: stream, payload: payload)
        }
        input.discardReadBytes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        flood = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    /// The client's preface came: the server's own, then the attacks that need no request.
    private func started(_ context: ChannelHandlerContext) {
        // SETTINGS_INITIAL_WINDOW_SIZE (4) of 0: no stream may send a byte of DATA.
        let settings: [UInt8] = attack == .windowNeverOpens ? [0, 4, 0, 0, 0, 0] : []
        write(context, Frame.make(Frame.settings, settings))
        switch attack {
        case .pingFlood:
            var count: UInt64 = 0
            flood = {
                count += 1
                return Frame.make(Frame.ping, withUnsafeBytes(of: count.bigEndian) { Array($0) })
            }
        case .settingsFlood:
            // SETTINGS_MAX_CONCURRENT_STREAMS (3): 100.
            flood = { Frame.make(Frame.settings, [0, 3, 0, 0, 0, 100]) }
        case .resetsForUnopenedStreams:
            var stream: UInt32 = 1001
            flood = {
                stream += 2
                return Frame.make(Frame.rstStream, stream: stream, Frame.uint32(8))  // CANCEL
            }
        case .goawayLoop:
            write(context, Frame.goaway(lastStream: 0))
        case .garbageAfterPreface:
            var state: UInt32 = 2_463_534_242
            write(
                context,
                (0..<65_536).map { _ in
                    state ^= state << 13
                    state ^= state >> 17
                    state ^= state << 5
                    return UInt8(truncatingIfNeeded: state)
                })
        default:
            break
        }
        pump(context)
    }

    private func received(
        _ context: ChannelHandlerContext, type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]
    ) {
        switch type {
        case Frame.settings where flags & Frame.ack == 0:
            for entry in stride(from: 0, to: payload.count - 5, by: 6) where payload[entry + 1] == 4 {
                initialStreamWindow = Int(Frame.readUInt32(payload, at: entry + 2))
            }
            write(context, Frame.make(Frame.settings, flags: Frame.ack))
        case Frame.ping where flags & Frame.ack == 0:
            write(context, Frame.make(Frame.ping, flags: Frame.ack, payload))
        case Frame.windowUpdate where payload.count == 4:
            let increment = Int(Frame.readUInt32(payload, at: 0) & 0x7fff_ffff)
            if stream == 0 {
                connectionWindow += increment
            } else {
                streamWindows[stream, default: initialStreamWindow] += increment
            }
            pump(context)
        case Frame.headers:
            answer(context, stream: stream)
        case Frame.data where attack == .windowNeverOpens && flags & Frame.endStream != 0:
            write(
                context,
                Frame.make(Frame.headers, flags: Frame.endHeaders | Frame.endStream, stream: stream, HPACK.status200))
        default:
            break
        }
    }

    /// The attack's answer to a request.
    private func answer(_ context: ChannelHandlerContext, stream: UInt32) {
        switch attack {
        case .continuationFlood:
            guard flood == nil else { return }  // one header block at a time on a connection
            write(context, Frame.make(Frame.headers, stream: stream, HPACK.status200))
            flood = { Frame.make(Frame.continuation, stream: stream, HPACK.literal("x-c", [0x31])) }
        case .hpackBomb:
            let block =
                HPACK.status200 + HPACK.indexedLiteral("x-bomb", [UInt8](repeating: 0x61, count: 4_000))
                + [UInt8](repeating: HPACK.firstDynamicEntry, count: 16_000)
            write(context, Frame.headerBlock(block, stream: stream, endStream: true))
        case .oversizedHeaderBlock:
            let block =
                HPACK.status200
                + (0..<70).flatMap { HPACK.literal("x-field-\($0)", [UInt8](repeating: 0x62, count: 1_000)) }
            write(context, Frame.headerBlock(block, stream: stream, endStream: false))
            write(context, Frame.make(Frame.data, flags: Frame.endStream, stream: stream, Array("{}".utf8)))
        case .endlessData:
            write(context, Frame.make(Frame.headers, flags: Frame.endHeaders, stream: stream, HPACK.status200))
            streamWindows[stream] = streamWindows[stream] ?? initialStreamWindow
            // Every stream's body, in turns, as far as the windows allow.
            flood = { [unowned self] in
                guard self.connectionWindow > 0,
                    let (stream, window) = self.streamWindows.filter({ $0.value > 0 }).min(by: { $0.key < $1.key })
                else { return nil }
                let length = min(16_384, self.connectionWindow, window)
                self.connectionWindow -= length
                self.streamWindows[stream] = window - length
                return Frame.make(Frame.data, stream: stream, [UInt8](repeating: 0x7b, count: length))
            }
        case .statusNotThreeDigits:
            // :status (static table entry 8) with a literal value, not indexed.
            write(
                context, Frame.headerBlock([0x08] + HPACK.string(Array("2000".utf8)), stream: stream, endStream: true))
        case .refusedEveryStream:
            write(context, Frame.make(Frame.rstStream, stream: stream, Frame.uint32(7)))  // REFUSED_STREAM
        case .goawayLoop:
            write(context, Frame.goaway(lastStream: 0))
        default:
            break
        }
        pump(context)
    }

    private func write(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
    }

    /// Writes the flood in batches of 64 KiB, each once the last has reached the socket, with
    /// reads between them: as fast as the client takes it.
    private func pump(_ context: ChannelHandlerContext) {
        guard !pumping, let flood else { return }
        var batch = context.channel.allocator.buffer(capacity: 65_536)
        while batch.readableBytes < 65_536, let bytes = flood() { batch.writeBytes(bytes) }
        guard batch.readableBytes > 0 else { return }
        pumping = true
        let loop = context.eventLoop.assumeIsolated()
        context.writeAndFlush(wrapOutboundOut(batch)).assumeIsolated().whenComplete { result in
            guard case .success = result else { return }
            loop.execute {
                self.pumping = false
                self.pump(context)
            }
        }
    }
}

/// HTTP/2 frames (RFC 9113 §4 and §6), as bytes.
private enum Frame {
    static let data: UInt8 = 0
    static let headers: UInt8 = 1
    static let rstStream: UInt8 = 3
    static let settings: UInt8 = 4
    static let ping: UInt8 = 6
    static let goaway: UInt8 = 7
    static let windowUpdate: UInt8 = 8
    static let continuation: UInt8 = 9

    static let endStream: UInt8 = 0x1
    static let ack: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4

    static func make(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + uint32(stream) + payload
    }

    /// A header block in a HEADERS frame and as many CONTINUATION frames as the default frame
    /// size (16,384 bytes) needs.
    static func headerBlock(_ block: [UInt8], stream: UInt32, endStream: Bool) -> [UInt8] {
        let pieces = stride(from: 0, to: block.count, by: 16_384).map {
            Array(block[$0..<min($0 + 16_384, block.count)])
        }
        return pieces.enumerated().flatMap { index, piece in
            let last = index == pieces.count - 1
            let flags = (last ? Frame.endHeaders : 0) | (index == 0 && endStream ? Frame.endStream : 0)
            return make(index == 0 ? headers : continuation, flags: flags, stream: stream, piece)
        }
    }

    static func goaway(lastStream: UInt32) -> [UInt8] {
        make(goaway, uint32(lastStream) + uint32(0))  // NO_ERROR
    }

    static func uint32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    static func readUInt32(_ bytes: [UInt8], at index: Int) -> UInt32 {
        bytes[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }
}

/// HPACK (RFC 7541) as far as the attacks need it: no Huffman coding.
private enum HPACK {
    /// `:status: 200`, the static table's entry 8.
    static let status200: [UInt8] = [0x88]
    /// The first entry of the dynamic table (index 62), referenced in one byte.
    static let firstDynamicEntry: UInt8 = 0x80 | 62

    /// A literal field with a new name, not added to the dynamic table (§6.2.2).
    static func literal(_ name: String, _ value: [UInt8]) -> [UInt8] {
        [0x00] + string(Array(name.utf8)) + string(value)
    }

    /// A literal field with a new name, added to the dynamic table (§6.2.1).
    static func indexedLiteral(_ name: String, _ value: [UInt8]) -> [UInt8] {
        [0x40] + string(Array(name.utf8)) + string(value)
    }

    static func string(_ bytes: [UInt8]) -> [UInt8] {
        integer(bytes.count, prefixBits: 7) + bytes
    }

    /// An integer with an N-bit prefix (§5.1), the prefix's other bits zero.
    static func integer(_ value: Int, prefixBits: Int) -> [UInt8] {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else { return [UInt8(value)] }
        var bytes = [UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            bytes.append(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        return bytes + [UInt8(rest)]
    }
}
