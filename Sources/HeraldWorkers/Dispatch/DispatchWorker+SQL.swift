extension DispatchWorker {
    enum SQL {
        /// Reads deliveries $5, leased at birth to worker $3, and leases up to $2 more, due by $1,
        /// to it for $4 seconds; returns everything needed to send them but their
        /// apps' setups, in one statement (`herald.claim_sends`, `migrations/functions/dispatch.sql`).
        static let claim = "SELECT * FROM herald.claim_sends($1, $2, $3, make_interval(secs => $4), $5::bigint[])"

        /// The setups of apps $1, with their rows' versions (`herald.app_setups`, the same file).
        static let appSetups = "SELECT * FROM herald.app_setups($1)"

        /// Records a batch's outcomes in one statement, so in one transaction: the deliveries,
        /// with their leases released; devices, Live Activity tokens and push type tokens whose
        /// provider declared them dead; and the configuration problems found or cleared
        /// (`herald.record_sends`, in `migrations/functions/dispatch.sql`, which says what each
        /// parameter is).
        static let record = """
            SELECT ended, id, token_hint, reason
            FROM herald.record_sends($1::herald.send_outcome[], $2::text, $3::timestamptz, $4::herald.dead_token[],
                                     $5::herald.dead_token[], $6::herald.config_problem[], $7::herald.dead_token[])
            """

        /// Extends, to $3 (now) + $4 seconds, the leases worker $2 still holds on deliveries $1
        /// (a lease that ran out and was claimed by another worker is left to it). Rare, so
        /// planned at each call; `IS TRUE` keeps it on the primary key (`herald.record_sends`
        /// says why).
        static let extendLeases = """
            UPDATE herald.deliveries SET run_at = $3::timestamptz + make_interval(secs => $4)
            WHERE id = ANY($1::bigint[]) AND (state = 'queued') IS TRUE AND locked_by = $2
            """

        /// Route $1 / $2 / $3 (app, route, origin or '') of worker $4 had its window full at $5,
        /// with $6 sends in flight and $7 deliveries postponed since the last report. Two quiet
        /// minutes end an episode: the next one starts its own `since` and count. Rows not seen
        /// for a day (a route long healthy, a worker long gone) are deleted on the way.
        static let recordSaturation = """
            WITH forgotten AS (
                DELETE FROM herald.route_saturation WHERE seen_at < $5::timestamptz - interval '1 day'
            )
            INSERT INTO herald.route_saturation AS s (app_id, route, origin, worker, since, seen_at, in_flight, postponed)
            VALUES ($1, $2, $3, $4, $5, $5, $6, $7)
            ON CONFLICT (app_id, route, origin, worker) DO UPDATE
            SET since = CASE WHEN s.seen_at < excluded.seen_at - interval '2 minutes' THEN excluded.since ELSE s.since END,
                postponed = CASE WHEN s.seen_at < excluded.seen_at - interval '2 minutes' THEN 0 ELSE s.postponed END
                            + excluded.postponed,
                seen_at = excluded.seen_at, in_flight = excluded.in_flight
            """
    }
}
