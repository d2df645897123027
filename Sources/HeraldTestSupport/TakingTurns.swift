/// Runs `body` when no other test that takes turns is running.
///
/// For the tests that start PostgreSQL clusters of their own (a standby, a pg_auto_failover
/// formation, a pooler) and load the machine for up to a minute: on two cores, several of them
/// at once, beside every other test at the suite's start, starved the in-process emulators past
/// their clients' 10 s connect timeout. One at a time, they still run beside the light tests.
public func takingTurns<T>(_ body: () async throws -> T) async rethrows -> T {
    await Turns.shared.acquire()
    do {
        let value = try await body()
        await Turns.shared.release()
        return value
    } catch {
        await Turns.shared.release()
        throw error
    }
}

private actor Turns {
    static let shared = Turns()
    private var taken = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        guard taken else {
            taken = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the turn to the next waiting test, or frees it.
    func release() {
        if waiting.isEmpty {
            taken = false
        } else {
            waiting.removeFirst().resume()
        }
    }
}
