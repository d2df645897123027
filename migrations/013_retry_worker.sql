-- 013: the retry worker ends waits that can no longer end in a send.
--
-- A delivery waiting out a retry's backoff used to stay `queued` until it was next claimed,
-- even when its notification had expired or its device had been disabled meanwhile (a dead
-- token found by another delivery), so operators saw it queued for up to an hour (the
-- backoff's cap). The retry worker now ends such waits as soon as it sees them, every few
-- seconds: `expired`, or `cancelled` with the device's reason.

-- Deliveries waiting for a retry: queued, not leased, attempted before. Ingest's inserts
-- (attempts = 0) and claims (locked_by set) fall outside the predicate, so the hot path
-- never writes this index; only a failed attempt's record does.
CREATE INDEX deliveries_retrying ON herald.deliveries (run_at)
    WHERE state = 'queued' AND locked_by IS NULL AND attempts > 0;

-- Ends up to `batch` deliveries waiting for a retry that cannot be sent any more, at `at`,
-- and says how many it ended, by state. Rows a claim holds are skipped; the claim checks the
-- same (expiry, device) before it sends.
CREATE FUNCTION herald.end_hopeless_retries(at timestamptz, batch int)
RETURNS TABLE (state text, deliveries bigint)
LANGUAGE sql AS $$
    WITH hopeless AS (
        SELECT d.id,
               CASE WHEN n.expires_at <= at THEN 'expired' ELSE 'cancelled' END AS state,
               CASE WHEN n.expires_at <= at
                    THEN format('expired at %s while waiting to be retried', n.expires_at)
                    ELSE format('device disabled while waiting to be retried: %s', dev.disabled_reason)
               END AS reason
        FROM herald.deliveries AS d
        JOIN herald.notifications AS n ON n.id = d.notification_id
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
$$;
REVOKE ALL ON FUNCTION herald.end_hopeless_retries(timestamptz, int) FROM PUBLIC;

-- How far back a woken device's missed notifications are looked for: by reconcile, which
-- wakes a device only for what it could still fetch, and by the pending fetch when the app
-- gives no `since`. Herald's code reads it from here.
CREATE FUNCTION herald.fetch_window() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '3 days' $$;
GRANT EXECUTE ON FUNCTION herald.fetch_window() TO herald_producer;
