-- 005: views for operators, the redrive function, and the read-only operator role.
--
-- Every question about the queue has an answer in SQL. Push tokens never appear in full:
-- the views show a hint (the first 8 characters).

CREATE FUNCTION herald.token_hint(token text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN token IS NULL THEN NULL ELSE left(token, 8) || '…' END;
$$;

-- One notification's journey: the notification, each of its deliveries, each device's
-- state, attempts, reasons and times. Look it up by id or by idempotency key:
--   SELECT * FROM herald.notification_journey WHERE notification_id = 42;
--   SELECT * FROM herald.notification_journey WHERE app_id = 'shop' AND idempotency_key = 'order-42-shipped';
CREATE VIEW herald.notification_journey AS
SELECT n.id AS notification_id, n.app_id, n.idempotency_key,
       coalesce('user ' || n.user_ref, 'devices ' || array_to_string(n.device_ids, ','), 'topic ' || n.topic) AS target,
       n.state AS notification_state, n.reason AS notification_reason, n.created_at, n.ingested_at, n.expires_at,
       d.id AS delivery_id, dev.device_id, dev.platform, herald.token_hint(dev.push_token) AS token_hint,
       d.payload_kind, d.state AS delivery_state, d.attempts, d.last_error, d.provider_message_id,
       d.sent_at, d.delivered_at, d.finished_at,
       dev.disabled_cause AS device_disabled_cause, dev.disabled_at AS device_disabled_at,
       d.error_history
FROM herald.notifications n
LEFT JOIN herald.deliveries d ON d.notification_id = n.id
LEFT JOIN herald.devices dev ON dev.id = d.device_id;

-- Disabled devices, by app and cause, with when and why:
--   SELECT disabled_cause, count(*) FROM herald.disabled_devices WHERE app_id = 'shop' GROUP BY 1;
CREATE VIEW herald.disabled_devices AS
SELECT app_id, device_id, platform, user_ref, herald.token_hint(push_token) AS token_hint,
       disabled_cause, disabled_reason, disabled_at, registered_at
FROM herald.devices
WHERE disabled_at IS NOT NULL;

-- Dead jobs, with their reason. Bring them back with herald.redrive(...).
CREATE VIEW herald.dead_jobs AS
SELECT id, kind, ref, attempts, max_attempts, last_error, created_at, dead_at
FROM herald.jobs
WHERE state = 'dead';

-- Deliveries per minute over the last hour, by what became of them.
CREATE VIEW herald.throughput AS
SELECT date_trunc('minute', coalesce(d.finished_at, d.delivered_at)) AS minute,
       count(*) FILTER (WHERE d.state = 'sent') AS sent,
       count(*) FILTER (WHERE d.state = 'delivered') AS delivered,
       count(*) FILTER (WHERE d.state = 'validated') AS validated,
       count(*) FILTER (WHERE d.state = 'failed') AS failed,
       count(*) FILTER (WHERE d.state = 'token_invalid') AS token_invalid,
       count(*) FILTER (WHERE d.state IN ('expired', 'cancelled')) AS expired_or_cancelled
FROM herald.deliveries d
WHERE coalesce(d.finished_at, d.delivered_at) > now() - interval '1 hour'
GROUP BY 1
ORDER BY 1 DESC;

-- Apps whose credentials or APNs setup fail now.
CREATE VIEW herald.app_problems AS
SELECT app_id, fcm_project_id, config_error, config_error_at
FROM herald.apps
WHERE config_error IS NOT NULL;

-- Every redrive, with who asked and what came back.
CREATE TABLE herald.redrives (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    redriven_at timestamptz NOT NULL DEFAULT now(),
    redriven_by text NOT NULL DEFAULT current_user,
    job_ids     bigint[] NOT NULL,
    note        text
);

-- Brings dead jobs back to ready, with their attempts reset: by id, or every dead job of a
-- kind that died since a time. Returns how many came back; the redrive is recorded.
--   SELECT herald.redrive(job_ids => '{101,102}');
--   SELECT herald.redrive(kind => 'dispatch', since => now() - interval '1 hour', note => 'FCM outage');
CREATE FUNCTION herald.redrive(job_ids bigint[] DEFAULT NULL, kind text DEFAULT NULL, since timestamptz DEFAULT NULL,
                               note text DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    revived bigint[];
BEGIN
    IF job_ids IS NULL AND kind IS NULL THEN
        RAISE EXCEPTION 'herald.redrive: name the jobs (job_ids => ...) or a kind (kind => ...)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH revived_jobs AS (
        UPDATE herald.jobs j
        SET state = 'ready', attempts = 0, run_at = now(), dead_at = NULL,
            last_error = 'redriven after: ' || coalesce(j.last_error, 'no error recorded')
        WHERE j.state = 'dead'
          AND (redrive.job_ids IS NULL OR j.id = ANY(redrive.job_ids))
          AND (redrive.kind IS NULL OR j.kind = redrive.kind)
          AND (redrive.since IS NULL OR j.dead_at >= redrive.since)
        RETURNING j.id
    )
    SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO revived FROM revived_jobs;
    IF cardinality(revived) > 0 THEN
        INSERT INTO herald.redrives (job_ids, note) VALUES (revived, redrive.note);
        PERFORM pg_notify('herald_jobs', k) FROM (SELECT DISTINCT j.kind AS k FROM herald.jobs j WHERE j.id = ANY(revived)) AS kinds;
    END IF;
    RETURN cardinality(revived);
END;
$$;
REVOKE ALL ON FUNCTION herald.redrive(bigint[], text, timestamptz, text) FROM PUBLIC;

-- The operator role: reads the views (and the queue depth), redrives; no raw tokens.
DO $$
BEGIN
    CREATE ROLE herald_operator NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END;
$$;
GRANT USAGE ON SCHEMA herald TO herald_operator;
GRANT SELECT ON herald.queue_depth, herald.notification_journey, herald.disabled_devices, herald.dead_jobs,
                herald.throughput, herald.app_problems, herald.redrives
    TO herald_operator;
GRANT EXECUTE ON FUNCTION herald.redrive(bigint[], text, timestamptz, text) TO herald_operator;
-- The views call this on the viewer's behalf.
GRANT EXECUTE ON FUNCTION herald.token_hint(text) TO herald_operator;
