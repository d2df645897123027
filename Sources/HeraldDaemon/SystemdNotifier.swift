import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// systemd's notification protocol (sd_notify(3)): datagrams such as `READY=1` or
/// `WATCHDOG=1` sent to the Unix socket named by `NOTIFY_SOCKET`. Without that variable
/// (not run by systemd with `Type=notify`) every call does nothing.
public struct SystemdNotifier: Sendable {
    let socketPath: String?
    /// `WATCHDOG_USEC`: how often systemd expects a ping, when the unit sets `WatchdogSec=`.
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogInterval = environment["WATCHDOG_USEC"].flatMap { UInt64($0) }.flatMap {
            $0 > 0 ? .microseconds($0) : nil
        }
    }

    public var isActive: Bool { socketPath != nil }

    /// Sends `state` (newline-separated `NAME=value` assignments); returns false if it could not.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // A leading "@" names a socket in the abstract namespace: a NUL byte on the wire.
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                sendto(fd, message, message.count, Int32(MSG_NOSIGNAL), socketAddress, length)
            }
        }
        return sent == message.count
    }
}
