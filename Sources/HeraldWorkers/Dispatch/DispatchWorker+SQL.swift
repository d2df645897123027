extension DispatchWorker {
    enum SQL {
        /// Leases up to $2 deliveries, due by $1, to worker $3 for $4 seconds, and reads beside
        /// them the deliveries $5 ingest leased to it at birth; returns everything needed to send
        /// them but their apps' setups, in one statement (`herald.claim_batch`,
        /// `migrations/functions/dispatch.sql`).
        static let claim = "SELECT * FROM herald.claim_batch($1, $2, $3, make_interval(secs => $4), $5::bigint[])"
        /// The app of each of the deliveries $1 (its notification's).
        static let apps = """
            SELECT d.id, coalesce(n.app_id, '') FROM herald.deliveries d
            LEFT JOIN herald.notifications n ON n.id = d.notification_id
            WHERE d.id = ANY($1::bigint[])
            """

        /// The setups of apps $1, with their rows' versions (`herald.app_setups`, the same file).
        static let appSetups = "SELECT app_id, app_version, provider_settings FROM herald.app_setups($1)"

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
        /// (`herald.extend_leases`, the same file). Rare, so planned at each call.
        static let extendLeases =
            "SELECT herald.extend_leases($1::bigint[], $2::text, $3::timestamptz, make_interval(secs => $4))"

        /// Route $1 / $2 / $3 (app, route, origin or '') of worker $4 had its window full at $5,
        /// with $6 sends in flight and $7 deliveries postponed since the last report
        /// (`herald.record_saturation`, the same file).
        static let recordSaturation =
            "SELECT herald.record_saturation($1::text, $2::text, $3::text, $4::text, $5::timestamptz, $6::int, $7::int)"
    }
}
