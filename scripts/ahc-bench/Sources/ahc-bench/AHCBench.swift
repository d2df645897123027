import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

// Usage: ahc-bench URL CA_BUNDLE [REQUESTS] [IN_FLIGHT] [THREADS]
// POSTs FCM's request (its JSON body, a 1,024-character bearer token) to URL over HTTP/2, with
// IN_FLIGHT requests at once, each from a task of its own, and prints requests a second and the
// process's CPU time a request.
/// Failures so far: the first is printed, then one in a thousand.
let failures = Mutex(0)

func report(_ failure: String) {
    if failures.withLock({
        $0 += 1; return $0 % 1000 == 1
    }) {
        print("failed: \(failure)")
    }
}

@main
struct AHCBench {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3 else {
            print("usage: ahc-bench URL CA_BUNDLE [REQUESTS] [IN_FLIGHT] [THREADS]")
            exit(2)
        }
        let url = arguments[1]
        let requests = arguments.count > 3 ? Int(arguments[3])! : 100_000
        let inFlight = arguments.count > 4 ? Int(arguments[4])! : 1000
        let threads = arguments.count > 5 ? Int(arguments[5])! : 1

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(arguments[2])
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let client = HTTPClient(eventLoopGroupProvider: .shared(eventLoops), configuration: configuration)

        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "authorization", value: "Bearer " + String(repeating: "t", count: 1024))
        let body = ByteBuffer(
            string:
                #"{"message":{"token":"bench-token","data":{"title":"Hello","body":"A benchmark notification","notification_id":"123456"},"android":{"priority":"HIGH","ttl":"86400s"}}}"#
        )
        request.body = .bytes(body)

        let finished = request

        @Sendable func send() async -> Bool {
            do {
                let response = try await client.execute(finished, timeout: .seconds(30))
                _ = try await response.body.collect(upTo: 1 << 20)
                if response.status == .ok && response.version == .http2 { return true }
                report("answered \(response.status) over \(response.version)")
                return false
            } catch {
                report("\(error)")
                return false
            }
        }

        func processCPU() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_SELF.rawValue, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }

        // Warm up: the connection open before the clock starts, as h2load and herald-bench do.
        guard await send() else {
            print("the first request failed (not answered 200 over HTTP/2)")
            exit(1)
        }
        let cpu = processCPU()
        let start = ContinuousClock.now
        let ok = await withTaskGroup(of: Int.self) { senders in
            for sender in 0..<inFlight {
                senders.addTask {
                    var ok = 0
                    for _ in stride(from: sender, to: requests, by: inFlight) {
                        if await send() { ok += 1 }
                    }
                    return ok
                }
            }
            var total = 0
            for await count in senders { total += count }
            return total
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            String(
                format:
                    "AsyncHTTPClient, %d event-loop thread(s): %d requests (%d ok, the rest failed) in %.2fs: %.0f req/s, %.1f µs CPU a request",
                threads, requests, ok, seconds, Double(requests) / seconds,
                (processCPU() - cpu) / Double(requests) * 1e6))
        try await client.shutdown()
        try await eventLoops.shutdownGracefully()
    }
}
