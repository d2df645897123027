import CSpawn
import Foundation
import HeraldCore

#if canImport(Glibc)
    import Glibc
#endif

/// A program a test runs beside it: a daemon, a PostgreSQL tool, a helper script.
///
/// Not Foundation's `Process`: it lists this process's descriptors to close them in the child,
/// and one opened on another thread meanwhile is inherited. A connection a test's server had just
/// accepted then outlived the server's close in a daemon another test started, and its client
/// waited for an end that never came. Here the child closes every descriptor but its three
/// itself. Its end is learnt by `waitpid` on a thread of its own, not from SIGCHLD on a dispatch
/// queue, which the suite's busiest moments delayed for seconds.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    /// Guards `waitStatus`, and tells its waiters when it is set.
    private let ended = NSCondition()
    private var waitStatus: Int32?

    /// Starts `executable` with `arguments`; `environment` replaces this process's own when
    /// given. Its standard input, output and error are the descriptors given (which stay this
    /// process's to close), or /dev/null.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Int32? = nil, standardOutput: Int32? = nil, standardError: Int32? = nil
    ) throws {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { if null >= 0 { close(null) } }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var started = pid_t()
        let status = herald_spawn(
            &started, executable, argv, envp, standardInput ?? null, standardOutput ?? null, standardError ?? null)
        guard status == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EINVAL, userInfo: [NSFilePathErrorKey: executable])
        }
        pid = started
        Thread { [self] in
            var status: Int32 = 0
            while waitpid(self.pid, &status, 0) == -1, errno == EINTR {}
            ended.withLock {
                waitStatus = status
                ended.broadcast()
            }
        }.start()
    }

    public var isRunning: Bool { ended.withLock { waitStatus == nil } }

    /// Its exit status, or the signal that ended it (as Foundation's `terminationStatus`); nil
    /// while it runs.
    public var terminationStatus: Int32? {
        ended.withLock { waitStatus.map { $0 & 0x7f == 0 ? ($0 >> 8) & 0xff : $0 & 0x7f } }
    }

    public func send(_ signal: Int32) { kill(pid, signal) }

    /// Blocks until it ends, or until `deadline`; false if it still runs.
    public func waitUntilExit(before deadline: Date? = nil) -> Bool {
        ended.withLock {
            while waitStatus == nil {
                if let deadline {
                    guard ended.wait(until: deadline) else { break }
                } else {
                    ended.wait()
                }
            }
            return waitStatus != nil
        }
    }

    /// Waits for it to end; false if it still runs after `timeout`.
    public func waitForExit(timeout: Duration) async -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout.seconds)
        return (try? await onOwnThread { self.waitUntilExit(before: deadline) }) ?? false
    }
}
