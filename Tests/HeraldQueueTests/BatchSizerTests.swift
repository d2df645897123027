import HeraldQueue
import Testing

@Suite struct BatchSizerTests {
    /// The claims' sizes for the counts claimed in turn, starting from an idle queue.
    func limits(cap: Int = 500, after counts: [Int]) -> [Int] {
        var sizer = BatchSizer(cap: cap)
        return counts.map { count in
            sizer.claimed(count)
            return sizer.limit
        }
    }

    @Test func aBacklogDoublesTheClaimUpToTheCapAndAShortQueueHalvesIt() {
        #expect(limits(cap: 100, after: [10, 20, 40, 80, 100, 100]) == [20, 40, 80, 100, 100, 100])
        #expect(limits(cap: 100, after: [10, 20, 40, 80, 100, 30, 30, 3]) == [20, 40, 80, 100, 100, 50, 50, 25])
        #expect(limits(after: [10, 20, 3, 2, 1]) == [20, 40, 20, 10, 10])
    }

    /// A steady trickle of ten a commit: the claim of ten fills once, and then stays at twenty,
    /// so no commit's batch fills it again (a full claim is looked at again at once, and wakes
    /// another loop). An empty claim changes nothing.
    @Test func anEmptyClaimLeavesTheSizeAsItIs() {
        #expect(limits(after: [10, 0, 10, 0, 10, 10]) == [20, 20, 20, 20, 20, 20])
        #expect(limits(after: [10, 20, 40, 0, 0, 0]) == [20, 40, 80, 80, 80, 80])
    }
}
