import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix datagram socket standing in for systemd's `NOTIFY_SOCKET`: it collects what the
/// daemon under test sends (`READY=1`, `WATCHDOG=1`, …).
public final class NotifySocket: @unchecked Sendable {
    public let path: String
    private let fd: Int32

    public init() throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8))")
            .path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard fd >= 0, bound == 0 else { throw POSIXError(.EADDRINUSE) }
    }

    /// The next message, or nil if none arrives within `timeout`.
    public func receive(timeout: Duration) async -> String? {
        (try? await onOwnThread { self.receiveBlocking(timeout: timeout) }) ?? nil
    }

    /// Every message that arrives during `duration`.
    public func collect(for duration: Duration) async -> [String] {
        (try? await onOwnThread { self.collectBlocking(for: duration) }) ?? []
    }

    private func receiveBlocking(timeout: Duration) -> String? {
        let (seconds, attoseconds) = timeout.components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        if limit.tv_sec == 0 && limit.tv_usec == 0 { limit.tv_usec = 1 }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
    }

    private func collectBlocking(for duration: Duration) -> [String] {
        let end = ContinuousClock.now + duration
        var messages: [String] = []
        while ContinuousClock.now < end {
            if let message = receiveBlocking(timeout: end - ContinuousClock.now) { messages.append(message) }
        }
        return messages
    }

    deinit {
        close(fd)
        unlink(path)
    }
}
