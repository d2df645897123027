extension DispatchWorker {
    enum SQL {
        /// Reads deliveries $5, leased at birth to worker $3, and leases up to $2 more, due by $1,
        /// to it for $4 seconds; returns everything needed to send them but their
        /// apps' setups, in one statement (`herald.claim_sends`, `migrations/functions/dispatch.sql`).
        static let claim = "SELECT * FROM herald.claim_sends($1, $2, $3, make_interval(secs => $4), $5::bigint[])"

        /// The setups of apps $1, with their rows' versions (`herald.app_setups`, the same file).
        static let appSetups = "SELECT * FROM herald.app_setups($1)"

        /// Records a batch's outcomes in one statement, so in one transaction: the
        /// deliveries, with their leases released; devices whose token or subscription the
        /// provider declared dead; and the configuration problems found or cleared.
        ///
        /// Deliveries: $1 ids, $2 new states, $3 the provider's message ids, $4 errors, $5 when FCM
        /// answered, $6 when a delivery still queued is due again (times as Unix seconds: a
        /// number binds without formatting a timestamp per delivery), $7 whether the claim is
        /// given back (postponed: not an attempt), $8 whether it ran out of attempts (dead).
        /// Only deliveries still queued change; one left queued for a retry changes only while
        /// worker $9 holds it, so a lease that ran out and was claimed again is not disturbed.
        ///
        /// Devices: $10 device ids, $11 the tokens that were sent to, $12 reasons, soft-disabled
        /// at $13 (now); one that registered a new token since is left alone.
        ///
        /// $17: APNs' apns-unique-id per delivery, beside $3. $18: per device of $10, the time from
        /// which the provider knew its token dead (APNs' 410 timestamp, Unix seconds), or NULL;
        /// a device that registered its token after that time is left alone.
        ///
        /// Live Activity tokens: $19 ids, $20 reasons: ended as `token_invalid` at $13 (an ended
        /// activity's token too; one the app replaced or dismissed keeps that reason).
        ///
        /// Configurations: $14 app ids, $15 scopes, $16 each one's problem, or NULL when it works
        /// again. A problem found again is confirmed at $13 (now), so the next probe waits a
        /// minute from this one; `since` changes only when the problem does.
        ///
        /// Each delivery is found by its primary key, whatever the planner believes of a new
        /// generation's partition before its first ANALYZE (measured in the soak: this statement
        /// took up to 0.5 s after each generation opened, against a few milliseconds):
        /// - `(d.state = 'queued') IS TRUE`, not `d.state = 'queued'`: with no statistics, the
        ///   partial index of queued deliveries looks tiny, and the planner would read it end to
        ///   end for every id (its dead entries are the whole partition until vacuum);
        /// - planned at each call (``PostgresConnection/Planning/eachCall``): a generic plan made
        ///   while the partition was empty would be kept as it grows.
        static let record = """
            WITH outcome AS (
                SELECT id, state, name, unique_id, error, to_timestamp(answered) AS answered_at,
                       to_timestamp(next_run) AS next_run, given_back, dead
                FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[],
                            $7::bool[], $8::bool[], $17::text[])
                     AS u(id, state, name, error, answered, next_run, given_back, dead, unique_id)
            ), recorded AS (
                UPDATE herald.deliveries AS d
                SET state = o.state,
                    provider_message_id = coalesce(o.name, d.provider_message_id),
                    provider_unique_id = coalesce(o.unique_id, d.provider_unique_id),
                    last_error = coalesce(o.error, d.last_error),
                    error_history = CASE WHEN o.error IS NULL THEN d.error_history
                                         ELSE d.error_history
                                              || format('%s %s', to_char(o.answered_at, 'YYYY-MM-DD HH24:MI:SS'), o.error)
                                    END,
                    attempts = d.attempts - CASE WHEN o.given_back THEN 1 ELSE 0 END,
                    sent_at = CASE WHEN o.state IN ('sent', 'validated') THEN o.answered_at ELSE d.sent_at END,
                    finished_at = CASE WHEN o.state <> 'queued' THEN o.answered_at END,
                    run_at = CASE WHEN o.state = 'queued' THEN o.next_run END,
                    locked_by = NULL,
                    dead_at = CASE WHEN o.dead THEN o.answered_at END
                FROM outcome AS o
                WHERE d.id = o.id AND (d.state = 'queued') IS TRUE AND (o.state <> 'queued' OR d.locked_by = $9)
            ), disabled AS (
                UPDATE herald.devices AS dev
                SET disabled_at = $13::timestamptz, disabled_cause = 'token_invalid', disabled_reason = u.reason
                FROM unnest($10::bigint[], $11::text[], $12::text[], $18::float8[]) AS u(id, token, reason, since)
                WHERE dev.id = u.id AND dev.push_token = u.token AND dev.disabled_at IS NULL
                  AND (u.since IS NULL OR dev.registered_at < to_timestamp(u.since))
            ), ended_activity_tokens AS (
                UPDATE herald.activity_tokens AS t
                SET ended_at = $13::timestamptz, ended_cause = 'token_invalid', ended_reason = u.reason
                FROM unnest($19::bigint[], $20::text[]) AS u(id, reason)
                WHERE t.id = u.id AND (t.ended_at IS NULL OR t.ended_cause = 'activity_ended')
            ), found AS (
                INSERT INTO herald.app_config_problems AS p (app_id, scope, problem, since, failed_at)
                SELECT u.app, u.scope, u.problem, $13, $13
                FROM unnest($14::text[], $15::text[], $16::text[]) AS u(app, scope, problem)
                WHERE u.problem IS NOT NULL
                ON CONFLICT (app_id, scope) DO UPDATE
                SET problem = excluded.problem, failed_at = excluded.failed_at,
                    since = CASE WHEN p.problem = excluded.problem THEN p.since ELSE excluded.since END
            ), cleared AS (
                DELETE FROM herald.app_config_problems AS p
                USING unnest($14::text[], $15::text[], $16::text[]) AS u(app, scope, problem)
                WHERE u.problem IS NULL AND p.app_id = u.app AND p.scope = u.scope
            )
            SELECT 1
            """

        /// Extends, to $3 (now) + $4 seconds, the leases worker $2 still holds on deliveries $1
        /// (a lease that ran out and was claimed by another worker is left to it). Written and
        /// planned as ``record`` is, to go by the primary key.
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

        static let secret = "SELECT value FROM herald.secrets WHERE name = 'report_hmac'"

        /// $1 app, $2 when its APNs certificate expires, as read from the file.
        static let recordCertificateExpiry = """
            UPDATE herald.apps SET apns_certificate_expires_at = $2
            WHERE app_id = $1 AND apns_certificate_expires_at IS DISTINCT FROM $2
            """
    }
}
