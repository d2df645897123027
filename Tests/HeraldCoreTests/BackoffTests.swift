import HeraldCore
import Testing

@Suite struct BackoffTests {
    @Test func ceilingDoublesUpToTheCap() {
        let backoff = Backoff(base: .seconds(1), cap: .seconds(10))
        #expect(
            (1...6).map { backoff.ceiling(afterAttempts: $0) } == [1, 2, 4, 8, 10, 10].map { Duration.seconds($0) })
    }

    @Test func fullJitterSpansZeroToTheCeiling() {
        #expect(Backoff(base: .seconds(2), random: { 0 }).delay(afterAttempts: 3) == .zero)
        #expect(Backoff(base: .seconds(2), random: { 0.5 }).delay(afterAttempts: 3) == .seconds(4))
    }

    @Test func retryAfterFloorWinsWhenLonger() {
        let backoff = Backoff(base: .seconds(1), random: { 0.5 })
        #expect(backoff.delay(afterAttempts: 1, atLeast: .seconds(60)) == .seconds(60))
        #expect(backoff.delay(afterAttempts: 10, atLeast: .seconds(1)) == .seconds(256))
    }
}
