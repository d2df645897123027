import Foundation
import HeraldTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The programs tests start: their exit and their signals are seen, and they hold no descriptor
/// of the test process but the three they are given.
struct ChildProcessTests {
    /// A socket without close-on-exec, as the connections a test's server accepts are, does not
    /// reach the child (one that did outlived its server's close).
    @Test func aChildHoldsOnlyTheDescriptorsItIsGiven() async throws {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socket >= 0)
        defer { close(socket) }
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC == 0)
        let listed = try await runProgram("/bin/ls", ["/proc/self/fd"])
        #expect(listed.status == 0, "\(listed.output)")
        // 0, 1 and 2, and the directory ls reads.
        #expect(listed.output.split(separator: "\n") == ["0", "1", "2", "3"], "\(listed.output)")
    }

    @Test func itsExitStatusAndTheSignalThatEndedItAreSeen() async throws {
        let exited = try ChildProcess("/bin/sh", ["-c", "exit 3"])
        #expect(await exited.waitForExit(timeout: .seconds(60)))
        #expect(exited.terminationStatus == 3)

        let sleeping = try ChildProcess("/bin/sleep", ["600"])
        #expect(sleeping.isRunning)
        #expect(sleeping.terminationStatus == nil)
        sleeping.send(SIGKILL)
        #expect(await sleeping.waitForExit(timeout: .seconds(60)))
        #expect(sleeping.terminationStatus == SIGKILL)
    }
}
