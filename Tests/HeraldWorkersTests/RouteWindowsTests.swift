import HeraldTestSupport
import Testing

@testable import HeraldWorkers

/// The route windows' rules, without I/O, on a clock the tests move.
@Suite struct RouteWindowsTests {
    let clock = ManualClock()
    let fcm = DispatchWorker.RouteKey(app: "shop", route: .fcm)
    let apns = DispatchWorker.RouteKey(app: "shop", route: .apns)

    @Test func anIdleRouteTakesItAllAndIsWaitedFor() {
        let windows = RouteWindows(clock: clock.monotonic)
        let first = windows.admit(apns, count: 700, window: 500)
        #expect(first.count == 700 && first.awaited)
        #expect(windows.inFlight(apns) == 700)
        // Another route is not affected.
        #expect(windows.admit(fcm, count: 500, window: 500).awaited)
    }

    @Test func aSlowRouteIsNotWaitedForAndGetsOnlyItsWindowsRoom() throws {
        let windows = RouteWindows(clock: clock.monotonic)
        let first = windows.admit(apns, count: 300, window: 500)
        // Out for less than a second: still healthy, taken whole and waited for.
        let young = windows.admit(apns, count: 50, window: 500)
        #expect(young.count == 50 && young.awaited)
        windows.release(apns, ticket: young.ticket)
        clock.advance(by: RouteWindows.slowAfter + .milliseconds(1))
        let second = windows.admit(apns, count: 400, window: 500)
        #expect(!second.awaited)
        #expect(second.count == 200)
        let third = windows.admit(apns, count: 100, window: 500)
        #expect(third.count == 0)
        // However small the claims, a slow route may have 100 out.
        #expect(windows.admit(fcm, count: 10, window: 10).count == 10)
        windows.release(apns, ticket: first.ticket)
        windows.release(apns, ticket: second.ticket)
        #expect(windows.inFlight(apns) == 0)
        #expect(windows.admit(apns, count: 100, window: 500).awaited, "idle again")
    }

    @Test func whatDoesNotFitWaitsAboutAsLongAsTheRouteTakes() throws {
        let windows = RouteWindows(clock: clock.monotonic)
        _ = windows.admit(apns, count: 500, window: 500)
        clock.advance(by: RouteWindows.slowAfter + .milliseconds(1))
        let wait = try #require(windows.admit(apns, count: 10, window: 500).waits.first)
        #expect(wait >= RouteWindows.slowAfter && wait <= RouteWindows.longestWait, "\(wait)")
    }

    /// A slow route's backlog comes back at the pace the route sends (a window per age of its
    /// oldest send), across claims, not all at once: at most a minute away.
    @Test func aSlowRoutesBacklogIsSpreadAtItsPace() throws {
        let windows = RouteWindows(clock: clock.monotonic)
        let sent = clock.instant
        _ = windows.admit(apns, count: 100, window: 100)
        clock.advance(by: RouteWindows.slowAfter + .milliseconds(1))
        let first = windows.admit(apns, count: 1000, window: 100).waits
        // The oldest send's age.
        let age = clock.instant - sent
        #expect(first.count == 1000)
        #expect(first == first.sorted(), "in order")
        // About the age for the first (at most 10 s), a hundredth of it (the age / a window of
        // 100) between each: the thousandth ten ages later, unless that is past the minute.
        #expect(first[0] >= .seconds(1) && first[0] <= age, "\(first[0]) age \(age)")
        let span = first[999] - first[0]
        let expected = min(age * 9.5 - .seconds(1), RouteWindows.longestSpread - first[0] - .seconds(1))
        #expect(span > expected && span <= age * 10, "\(span) age \(age)")
        // The next claim's share goes after this one's: its first wait, counted from its own
        // (later) moment, ends no sooner than the first claim's last.
        let second = windows.admit(apns, count: 10_000, window: 100).waits
        let between = clock.instant - sent
        #expect(try #require(second.first) + between >= first[999])
        // Never more than a minute away.
        #expect(second.last == RouteWindows.longestSpread)
    }
}
