-- operators: what herald_operator reads and does: the views, herald.redrive and
-- herald.enable_device (docs/operators.md). The views grant the daemon what its default
-- privileges give every table (migration 008).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- How deep each queue is: notifications waiting for ingest, deliveries waiting to be sent,
-- and herald.jobs by kind. A kind appears while it has work.
CREATE OR REPLACE VIEW herald.queue_depth AS
WITH ingest AS (
    SELECT count(*) AS ready, now() - min(created_at) AS oldest_ready_age
    FROM herald.notifications
    WHERE state = 'received'
), dispatch AS (
    SELECT count(*) FILTER (WHERE locked_by IS NULL AND run_at <= now())     AS ready,
           count(*) FILTER (WHERE locked_by IS NULL AND run_at > now())      AS scheduled,
           count(*) FILTER (WHERE locked_by IS NOT NULL)                     AS running,
           count(*) FILTER (WHERE locked_by IS NOT NULL AND run_at < now())  AS lease_expired,
           (SELECT count(*) FROM herald.deliveries WHERE dead_at IS NOT NULL) AS dead,
           now() - min(run_at) FILTER (WHERE locked_by IS NULL AND run_at <= now()) AS oldest_ready_age
    FROM herald.deliveries
    WHERE state = 'queued'
)
SELECT 'ingest'::text AS kind, ready, 0::bigint AS scheduled, 0::bigint AS running, 0::bigint AS lease_expired,
       0::bigint AS dead, oldest_ready_age
FROM ingest WHERE ready > 0
UNION ALL
SELECT 'dispatch', ready, scheduled, running, lease_expired, dead, oldest_ready_age
FROM dispatch WHERE ready + scheduled + running + dead > 0
UNION ALL
SELECT kind,
       count(*) FILTER (WHERE state = 'ready' AND run_at <= now()),
       count(*) FILTER (WHERE state = 'ready' AND run_at > now()),
       count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'running' AND locked_until < now()),
       count(*) FILTER (WHERE state = 'dead'),
       now() - min(run_at) FILTER (WHERE state = 'ready' AND run_at <= now())
FROM herald.jobs
GROUP BY kind;
REVOKE ALL ON herald.queue_depth FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.queue_depth TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.queue_depth TO herald_daemon;
COMMENT ON VIEW herald.queue_depth IS
    'How deep each queue is: notifications waiting for ingest, deliveries waiting to be sent, and herald.jobs by kind, with how long the oldest ready one has waited';

-- The journey shows when a queued delivery is next due, and when a dead one gave up.
CREATE OR REPLACE VIEW herald.notification_journey AS
SELECT n.id AS notification_id, n.app_id, n.idempotency_key,
       coalesce('user ' || n.user_ref, 'devices ' || array_to_string(n.device_ids, ','), 'topic ' || n.topic,
                'activity ' || n.activity_id) AS target,
       n.state AS notification_state, n.reason AS notification_reason, n.created_at, n.ingested_at, n.expires_at,
       -- The token the delivery went to: the device's own, or its token of a push type.
       d.id AS delivery_id, dev.device_id, dev.platform,
       herald.token_hint(CASE WHEN d.push_type_token_id IS NULL THEN dev.push_token ELSE pt.token END) AS token_hint,
       d.payload_kind, d.state AS delivery_state, d.attempts, d.last_error, d.provider_message_id,
       d.sent_at, d.delivered_at, d.finished_at,
       dev.disabled_cause AS device_disabled_cause, dev.disabled_at AS device_disabled_at,
       d.error_history,
       CASE WHEN d.state = 'queued' THEN d.run_at END AS next_attempt_at, d.dead_at
FROM herald.notifications n
LEFT JOIN herald.deliveries d ON d.notification_id = n.id
LEFT JOIN herald.devices dev ON dev.id = d.device_id
LEFT JOIN herald.push_type_tokens pt ON pt.id = d.push_type_token_id;
REVOKE ALL ON herald.notification_journey FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.notification_journey TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.notification_journey TO herald_daemon;
COMMENT ON VIEW herald.notification_journey IS
    'Each notification with each of its deliveries: target, state and reason, device and token hint, attempts and errors, when a queued one is next due and when a dead one gave up';

-- A Live Activity's life: each of its events (a notification), what became of it, and each send
-- with its device, token and outcome:
--   SELECT * FROM herald.live_activity_sends WHERE app_id = 'shop' AND activity_id = 'order-42';
CREATE OR REPLACE VIEW herald.live_activity_sends AS
SELECT a.app_id, a.activity_id, a.state AS activity_state, a.user_ref,
       n.id AS notification_id, n.activity_event AS event, n.activity_event_at AS event_at,
       n.state AS notification_state, n.reason AS notification_reason,
       d.id AS delivery_id, dev.device_id, t.kind AS token_kind, herald.token_hint(t.token) AS token_hint,
       t.ended_cause AS token_ended_cause, d.state AS delivery_state, d.attempts, d.last_error,
       d.provider_message_id, d.sent_at, d.finished_at
FROM herald.live_activities a
JOIN herald.activity_events e ON e.live_activity_id = a.id
JOIN herald.notifications n ON n.id = e.notification_id
LEFT JOIN herald.deliveries d ON d.notification_id = n.id
LEFT JOIN herald.activity_tokens t ON t.id = d.activity_token_id
LEFT JOIN herald.devices dev ON dev.id = d.device_id;
REVOKE ALL ON herald.live_activity_sends FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.live_activity_sends TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.live_activity_sends TO herald_daemon;
COMMENT ON VIEW herald.live_activity_sends IS
    'A Live Activity''s life: each of its events, what became of it, and each send with its device, token and outcome';

-- Disabled devices, by app and cause, with when and why:
--   SELECT disabled_cause, count(*) FROM herald.disabled_devices WHERE app_id = 'shop' GROUP BY 1;
CREATE OR REPLACE VIEW herald.disabled_devices AS
SELECT app_id, device_id, platform, user_ref, herald.token_hint(push_token) AS token_hint,
       disabled_cause, disabled_reason, disabled_at, registered_at
FROM herald.devices
WHERE disabled_at IS NOT NULL;
REVOKE ALL ON herald.disabled_devices FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.disabled_devices TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.disabled_devices TO herald_daemon;
COMMENT ON VIEW herald.disabled_devices IS
    'Disabled devices: their token hint, why (cause and reason) and since when';

-- Dead work: jobs, and deliveries that ran out of attempts (kind 'dispatch', the delivery's id
-- in ref; their id is NULL, since they are not jobs). herald.redrive brings back either.
CREATE OR REPLACE VIEW herald.dead_jobs AS
SELECT id, kind, ref, attempts, max_attempts, last_error, created_at, dead_at
FROM herald.jobs
WHERE state = 'dead'
UNION ALL
SELECT NULL, 'dispatch', id, attempts, NULL, last_error, created_at, dead_at
FROM herald.deliveries
WHERE dead_at IS NOT NULL;
REVOKE ALL ON herald.dead_jobs FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.dead_jobs TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.dead_jobs TO herald_daemon;
COMMENT ON VIEW herald.dead_jobs IS
    'Dead work: jobs, and deliveries that ran out of attempts (kind dispatch, the delivery''s id in ref), which a redrive brings back';

-- Deliveries per minute over the last hour, by what became of them.
CREATE OR REPLACE VIEW herald.throughput AS
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
REVOKE ALL ON herald.throughput FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.throughput TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.throughput TO herald_daemon;
COMMENT ON VIEW herald.throughput IS
    'Deliveries per minute over the last hour, by what became of them';

-- The partitions of herald.notifications, herald.deliveries and herald.delivery_reports
-- (migrations 020 and 022, docs/scaling.md): one row per generation (rows estimated from the
-- statistics, -1 before the first ANALYZE; no reports for the generations before migration 022,
-- whose reports are the open one's then) with when it opened and closed (it is dropped a
-- retention after), then the kept partitions (rows that outlived their generation), counted
-- exactly.
CREATE OR REPLACE VIEW herald.partitions AS
SELECT 'g' || g.generation AS part, g.generation, g.opened_at, g.closed_at,
       n.reltuples::bigint AS notifications, d.reltuples::bigint AS deliveries,
       pg_total_relation_size(n.oid) + pg_total_relation_size(d.oid) + coalesce(pg_total_relation_size(r.oid), 0) AS bytes,
       r.reltuples::bigint AS reports
FROM herald.generations g
JOIN pg_class n ON n.oid = to_regclass(format('herald.notifications_g%s', g.generation))
JOIN pg_class d ON d.oid = to_regclass(format('herald.deliveries_g%s', g.generation))
LEFT JOIN pg_class r ON r.oid = to_regclass(format('herald.delivery_reports_g%s', g.generation))
UNION ALL
SELECT 'kept', NULL, NULL, NULL, (SELECT count(*) FROM herald.notifications_kept),
       (SELECT count(*) FROM herald.deliveries_kept),
       pg_total_relation_size('herald.notifications_kept') + pg_total_relation_size('herald.deliveries_kept')
       + pg_total_relation_size('herald.delivery_reports_kept'),
       (SELECT count(*) FROM herald.delivery_reports_kept);
REVOKE ALL ON herald.partitions FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.partitions TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.partitions IS
    'The partitions of notifications, deliveries and reports: one row per generation (rows estimated, when it opened and closed), then the kept partitions, counted exactly';

-- Configuration problems, and certificates about to expire: Apple's push certificates last a
-- year, and an expired one fails every send, so the warning starts 30 days ahead.
CREATE OR REPLACE VIEW herald.app_problems AS
SELECT p.app_id, f.project_id AS fcm_project_id, p.problem AS config_error, p.since AS config_error_at, p.scope,
       p.failed_at, s.waiting
FROM herald.app_config_problems p
JOIN herald.config_scopes s ON s.scope = p.scope
LEFT JOIN herald.app_fcm f ON f.app_id = p.app_id
UNION ALL
SELECT a.app_id, f.project_id,
       CASE WHEN a.certificate_expires_at <= now()
            THEN format('the APNs certificate %s expired at %s: every send to APNs fails until it is renewed',
                        a.certificate_file, a.certificate_expires_at)
            ELSE format('the APNs certificate %s expires at %s, in %s days: renew it',
                        a.certificate_file, a.certificate_expires_at,
                        ceil(extract(epoch FROM a.certificate_expires_at - now()) / 86400))
       END,
       a.certificate_expires_at - interval '30 days', 'apns_certificate', NULL,
       'nothing yet'
FROM herald.app_apns a
LEFT JOIN herald.app_fcm f ON f.app_id = a.app_id
WHERE a.certificate_file IS NOT NULL AND a.certificate_expires_at < now() + interval '30 days';
REVOKE ALL ON herald.app_problems FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.app_problems TO herald_daemon;
GRANT SELECT ON herald.app_problems TO herald_operator;
COMMENT ON VIEW herald.app_problems IS
    'Each app''s failing configurations, and APNs push certificates that expire within 30 days';

-- Accounts a provider refused for their quota: every daemon waits until paused_until, and
-- herald status says so. FCM answers 429 for a project over its quota (herald.fcm_quotas,
-- migration 019); the other providers' limits are herald.provider_pauses (migration 050).
CREATE OR REPLACE VIEW herald.quota_pauses AS
SELECT 'fcm'::text AS provider, 'FCM project ' || q.project_id AS account, q.paused_until,
       'FCM: ' || coalesce(q.paused_reason, '429') AS reason,
       'if it recurs, lower HERALD_FCM_RATE_LIMIT or the project''s herald.fcm_quotas.per_second, or ask Google for more'::text
           AS advice
FROM herald.fcm_quotas q
WHERE q.paused_until > now()
UNION ALL
SELECT p.provider, p.account || CASE WHEN p.part <> '' THEN ' (' || p.part || ')' ELSE '' END, p.paused_until, p.reason,
       'it ends on its own; if it recurs, the app sends more than the provider allows it: send less, or ask the provider for more'::text
FROM herald.provider_pauses p
WHERE p.paused_until > now();
REVOKE ALL ON herald.quota_pauses FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.quota_pauses TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.quota_pauses IS
    'Accounts a provider paused for their quota or rate (FCM''s 429, herald.provider_pauses): every daemon waits until paused_until';

-- Sessions that hold up Herald's workers (docs/operators.md#sessions-that-hold-up-the-workers):
-- any other session whose transaction has been open for more than 10 seconds, which holds every
-- row it wrote (a device it registered, a delivery it fetched) and the tables it touched until it
-- ends, and any session one of Herald's is waiting for right now. With the apps its role may act
-- for (herald.producer_apps), the work it can hold up. The workers wait at most their bound for
-- such a row and go on without it (StatementBounds); retention cannot drop a partition a
-- transaction still holds. Seeing other roles' sessions needs pg_read_all_stats (or pg_monitor)
-- for the role that reads this.
--   SELECT * FROM herald.lock_holders;
CREATE OR REPLACE VIEW herald.lock_holders AS
WITH herald_waits AS (
    SELECT unnest(pg_blocking_pids(w.pid)) AS holder, w.pid AS waiter
    FROM pg_stat_activity w
    WHERE w.datname = current_database() AND w.application_name LIKE 'herald%' AND w.wait_event_type = 'Lock'
)
SELECT a.pid, a.usename::text AS role, a.application_name, host(a.client_addr) AS client, a.state,
       a.xact_start AS transaction_since, a.state_change AS state_since,
       (SELECT count(*) FROM herald_waits w WHERE w.holder = a.pid)::int AS herald_sessions_waiting,
       ARRAY(SELECT p.app_id FROM herald.producer_apps p
             WHERE pg_has_role(a.usesysid, p.producer::oid, 'MEMBER') ORDER BY p.app_id) AS acts_for
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'
  AND a.xact_start IS NOT NULL
  AND (a.pid IN (SELECT w.holder FROM herald_waits w)
       OR (a.xact_start < now() - interval '10 seconds'
           -- Not a daemon's: a session of another role may call itself herald, but not be one.
           AND (a.application_name NOT LIKE 'herald%' OR NOT pg_has_role(a.usesysid, 'herald_daemon', 'MEMBER'))));
REVOKE ALL ON herald.lock_holders FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.lock_holders TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.lock_holders IS
    'Sessions that hold up Herald''s workers: a transaction open for more than 10 s, or one a Herald session waits for now, with the apps its role acts for';

-- For operators: wake-ups, with the device and what they were for.
--   SELECT * FROM herald.recent_wakeups WHERE app_id = 'shop' ORDER BY created_at DESC LIMIT 20;
CREATE OR REPLACE VIEW herald.recent_wakeups AS
SELECT w.id, dev.app_id, dev.device_id, w.missed, w.created_at, w.quiet_until, w.notification_id,
       d.state AS delivery_state, d.sent_at, d.last_error
FROM herald.wakeups w
JOIN herald.devices dev ON dev.id = w.device_id
LEFT JOIN herald.deliveries d ON d.notification_id = w.notification_id;
REVOKE ALL ON herald.recent_wakeups FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.recent_wakeups TO herald_operator;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.recent_wakeups TO herald_daemon;
COMMENT ON VIEW herald.recent_wakeups IS
    'Wake-ups, with the device and what they were for';

-- Devices whose store at their provider is full, and what Herald holds for them meanwhile (FCM
-- keeps at most 100 messages for an offline phone and drops them all past that): how many,
-- since when, until when the last may wait, when the device last reported, and why. A report
-- from the device sends them as the store has room; the app's fetch marks them delivered; at
-- its expiry each ends expired.
--   SELECT * FROM herald.held_deliveries WHERE app_id = 'shop' ORDER BY held DESC;
CREATE OR REPLACE VIEW herald.held_deliveries AS
SELECT dev.app_id, dev.device_id, dev.platform, count(*) AS held, min(d.held_since) AS held_since,
       max(d.run_at) AS last_expires_at, dev.last_reported_at, min(d.last_error) AS reason
FROM herald.deliveries d
JOIN herald.devices dev ON dev.id = d.device_id
WHERE d.state = 'queued' AND d.held_since IS NOT NULL
GROUP BY dev.id;
REVOKE ALL ON herald.held_deliveries FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.held_deliveries TO herald_operator;
COMMENT ON VIEW herald.held_deliveries IS
    'Devices whose store at their provider is full, with how many deliveries Herald holds for them, since when and why';

-- Brings dead work back, with its attempts reset, and records the redrive:
--   * jobs by id (job_ids), or every dead job of a kind that died since a time;
--   * dead deliveries by id (delivery_ids), or with kind => 'dispatch' every one that died
--     since a time.
-- Returns how many came back.
--   SELECT herald.redrive(job_ids => '{101,102}');
--   SELECT herald.redrive(delivery_ids => '{5001}');
--   SELECT herald.redrive(kind => 'dispatch', since => now() - interval '1 hour', note => 'FCM outage');
CREATE OR REPLACE FUNCTION herald.redrive(job_ids bigint[] DEFAULT NULL, kind text DEFAULT NULL,
    since timestamptz DEFAULT NULL, note text DEFAULT NULL, delivery_ids bigint[] DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    revived_jobs bigint[] := '{}';
    revived_deliveries bigint[] := '{}';
BEGIN
    IF job_ids IS NULL AND kind IS NULL AND delivery_ids IS NULL THEN
        RAISE EXCEPTION 'herald.redrive: name the jobs (job_ids => ...), the deliveries (delivery_ids => ...) or a kind (kind => ...)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF job_ids IS NOT NULL OR (kind IS NOT NULL AND delivery_ids IS NULL) THEN
        WITH revived AS (
            UPDATE herald.jobs j
            SET state = 'ready', attempts = 0, run_at = now(), dead_at = NULL,
                last_error = 'redriven after: ' || coalesce(j.last_error, 'no error recorded')
            WHERE j.state = 'dead'
              AND (redrive.job_ids IS NULL OR j.id = ANY(redrive.job_ids))
              AND (redrive.kind IS NULL OR j.kind = redrive.kind)
              AND (redrive.since IS NULL OR j.dead_at >= redrive.since)
            RETURNING j.id
        )
        SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO revived_jobs FROM revived;
    END IF;
    IF delivery_ids IS NOT NULL OR (kind = 'dispatch' AND job_ids IS NULL) THEN
        WITH revived AS (
            UPDATE herald.deliveries d
            SET state = 'queued', attempts = 0, run_at = now(), locked_by = NULL, dead_at = NULL, finished_at = NULL,
                last_error = 'redriven after: ' || coalesce(d.last_error, 'no error recorded')
            WHERE d.dead_at IS NOT NULL
              AND (redrive.delivery_ids IS NULL OR d.id = ANY(redrive.delivery_ids))
              -- A delivery can outlive its notification by up to a partition interval
              -- (docs/scaling.md): with nothing left to send, it stays dead.
              AND EXISTS (SELECT 1 FROM herald.notifications n WHERE n.id = d.notification_id)
              AND (redrive.since IS NULL OR d.dead_at >= redrive.since)
            RETURNING d.id
        )
        SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO revived_deliveries FROM revived;
    END IF;
    IF cardinality(revived_jobs) + cardinality(revived_deliveries) > 0 THEN
        -- session_user: inside this SECURITY DEFINER function current_user is the function's owner.
        INSERT INTO herald.redrives (job_ids, delivery_ids, note, redriven_by)
        VALUES (revived_jobs, revived_deliveries, redrive.note, session_user);
        PERFORM pg_notify('herald_jobs', k)
        FROM (SELECT DISTINCT j.kind AS k FROM herald.jobs j WHERE j.id = ANY(revived_jobs)) AS kinds;
        IF cardinality(revived_deliveries) > 0 THEN
            PERFORM pg_notify('herald_jobs', 'dispatch');
        END IF;
    END IF;
    RETURN cardinality(revived_jobs) + cardinality(revived_deliveries);
END;
$$;
REVOKE ALL ON FUNCTION herald.redrive(bigint[],text,timestamp with time zone,text,bigint[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.redrive(bigint[],text,timestamp with time zone,text,bigint[]) TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.redrive(bigint[],text,timestamp with time zone,text,bigint[]) TO herald_operator;

-- An operator enables a disabled device again, for example after a misconfiguration disabled
-- it wrongly, with the widget, VoIP, location and Push to Talk tokens its provider declared
-- dead (not one another device of the app holds since). Refused for a device without a token
-- (it moved away): it must register again.
CREATE OR REPLACE FUNCTION herald.enable_device(app text, device text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE herald.push_type_tokens t
    SET disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    FROM herald.devices d
    WHERE d.id = t.device_id AND d.app_id = app AND d.device_id = device AND t.disabled_cause = 'token_invalid'
      AND NOT EXISTS (SELECT FROM herald.push_type_tokens o
                      WHERE o.app_id = t.app_id AND o.token_kind = t.token_kind AND o.token = t.token
                        AND o.disabled_at IS NULL);
    UPDATE herald.devices
    SET disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    WHERE app_id = app AND device_id = device AND push_token IS NOT NULL;
    IF FOUND THEN RETURN true; END IF;
    IF EXISTS (SELECT 1 FROM herald.devices WHERE app_id = app AND device_id = device) THEN
        RAISE EXCEPTION 'herald.enable_device: device % has no push token (it moved to another device); it must register again',
            quote_literal(device) USING ERRCODE = 'check_violation';
    END IF;
    RETURN false;
END;
$$;
REVOKE ALL ON FUNCTION herald.enable_device(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.enable_device(text,text) TO herald_operator;
GRANT EXECUTE ON FUNCTION herald.enable_device(text,text) TO herald_daemon;
