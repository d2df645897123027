-- retry: the retry worker's passes (RetryWorker).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Ends up to `batch` deliveries waiting for a retry that cannot be sent any more, at `at`,
-- and says how many it ended, by state. Rows a claim holds are skipped; the claim checks the
-- same (expiry, device) before it sends.
--
-- Planned at each call, as the pass is rare and its tables' sizes change between passes; but
-- when no delivery waits for a retry (deliveries_retrying is empty, as at a trickle without
-- failures, or idle) it ends before: planning the statement over the partitioned tables cost
-- more CPU than the rest of an idle daemon's polling together. With sequential scans off, that
-- check reads deliveries_retrying whatever the statistics say (a partition analyzed while it
-- held a few rows was read whole: PlanningTests).
CREATE OR REPLACE FUNCTION herald.end_hopeless_retries(at timestamptz, batch int)
RETURNS TABLE (state text, deliveries bigint)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET enable_seqscan = off AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM herald.deliveries d WHERE d.state = 'queued' AND d.locked_by IS NULL AND d.attempts > 0) THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH hopeless AS (
        SELECT d.id,
               CASE WHEN n.expires_at <= at THEN 'expired' ELSE 'cancelled' END AS state,
               CASE WHEN n.expires_at <= at
                    THEN format('expired at %s while waiting to be retried', n.expires_at)
                    ELSE format('device disabled while waiting to be retried: %s', dev.disabled_reason)
               END AS reason
        FROM herald.deliveries AS d
        -- Each delivery's notification by its id (OFFSET 0 keeps the lookup a lookup): a join the
        -- planner may turn into reading every notification of a partition not yet analyzed.
        CROSS JOIN LATERAL (SELECT n.expires_at FROM herald.notifications AS n
                            WHERE n.id = d.notification_id OFFSET 0) AS n
        LEFT JOIN herald.devices AS dev ON dev.id = d.device_id
        WHERE d.state = 'queued' AND d.locked_by IS NULL AND d.attempts > 0
          AND (n.expires_at <= at OR dev.disabled_at IS NOT NULL)
        LIMIT batch
        FOR UPDATE OF d SKIP LOCKED
    ), ended AS (
        UPDATE herald.deliveries AS d
        SET state = h.state, last_error = h.reason, finished_at = at, run_at = NULL,
            error_history = d.error_history || format('%s %s', to_char(at, 'YYYY-MM-DD HH24:MI:SS'), h.reason)
        FROM hopeless AS h
        WHERE d.id = h.id
        RETURNING d.state
    )
    SELECT ended.state, count(*) FROM ended GROUP BY ended.state;
END;
$$;
REVOKE ALL ON FUNCTION herald.end_hopeless_retries(timestamp with time zone,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.end_hopeless_retries(timestamp with time zone,integer) TO herald_daemon;

-- A configuration problem nothing waits on any more is cleared, so herald.app_problems and
-- herald status stop reporting it. While deliveries wait, a probe confirms failed_at every
-- minute; one unconfirmed for five minutes is checked against the queued deliveries that
-- need that configuration (rare, so the scan is rare, and planned only then). Returns how many
-- were cleared.
CREATE OR REPLACE FUNCTION herald.clear_idle_config_problems(at timestamptz) RETURNS int
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $$
DECLARE
    how_many int;
BEGIN
    IF NOT EXISTS (SELECT FROM herald.app_config_problems p WHERE p.failed_at < at - interval '5 minutes') THEN
        RETURN 0;
    END IF;
    WITH cleared AS (
        DELETE FROM herald.app_config_problems p
        WHERE p.failed_at < at - interval '5 minutes'
          AND NOT EXISTS (
              SELECT 1
              FROM herald.deliveries d
              CROSS JOIN LATERAL (SELECT n.app_id FROM herald.notifications n
                                  WHERE n.id = d.notification_id OFFSET 0) AS n
              LEFT JOIN herald.devices dev ON dev.id = d.device_id
              LEFT JOIN herald.push_types pt ON pt.payload_kind = d.payload_kind
              JOIN herald.route_rules r ON r.payload_kind = d.payload_kind
                                       AND r.token_kind IS NOT DISTINCT FROM coalesce(pt.token_kind, dev.token_kind)
              WHERE d.state = 'queued' AND n.app_id = p.app_id AND p.scope = ANY(r.scopes))
        RETURNING 1
    )
    SELECT count(*)::int INTO how_many FROM cleared;
    RETURN how_many;
END;
$$;
REVOKE ALL ON FUNCTION herald.clear_idle_config_problems(timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.clear_idle_config_problems(timestamp with time zone) TO herald_daemon;
