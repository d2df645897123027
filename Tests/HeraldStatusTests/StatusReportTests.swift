import Testing

@testable import HeraldStatus

/// `herald status` names a stall where an operator looks.
@Suite struct StatusReportTests {
    @Test func statusSaysWhenIngestOrDispatchFallsBehind() {
        func status(_ kind: String, waited: Double?) -> StatusReport {
            StatusReport(kinds: [
                StatusReport.Kind(
                    kind: kind, ready: 5, scheduled: 0, running: 0, leaseExpired: 0, dead: 0, oldestReadySeconds: waited
                )
            ])
        }
        #expect(status("dispatch", waited: 2).problems(maximumReadyAge: 300).isEmpty)
        #expect(
            status("dispatch", waited: 75).problems(maximumReadyAge: 300) == [
                "dispatch is falling behind: its oldest due item waited 75s, where a notification leaves within"
                    + " moments; a running daemon logs each slow dispatch claim or record"
            ])
        #expect(status("ingest", waited: 75).problems(maximumReadyAge: 300).count == 1)
        // Other kinds wait for their own reasons (a reconcile job's retry); past the backlog's
        // age every kind is reported, once.
        #expect(status("reconcile", waited: 75).problems(maximumReadyAge: 300).isEmpty)
        #expect(
            status("dispatch", waited: 400).problems(maximumReadyAge: 300) == [
                "dispatch backlog: oldest ready job waited 400s"
            ])
    }
}
