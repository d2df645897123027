import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP port on 127.0.0.1 that takes connections and never answers, as a server that stopped
/// answering (or a network path that silently drops) looks to a client: the kernel completes
/// each handshake into the listen backlog, and nothing ever reads or writes.
public final class BlackHole: Sendable {
    public let port: Int
    private let descriptor: Int32

    public var baseURL: String { "https://127.0.0.1:\(port)" }

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    private let closed = Atomic<Bool>(false)

    /// Stops listening: the connections waiting in its backlog are reset, so requests stuck on
    /// it fail at once.
    public func shutDown() {
        if !closed.exchange(true, ordering: .relaxed) { close(descriptor) }
    }

    deinit { shutDown() }
}
