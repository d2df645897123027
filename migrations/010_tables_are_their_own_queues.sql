-- 010: notifications and deliveries are their own queues.
--
-- Until now every notification went through job rows as well: an ingest job (inserted by a
-- trigger in the producer's transaction, claimed, deleted) and, per device, a dispatch job
-- (inserted by ingest, claimed, deleted). With the notification's and the delivery's own
-- writes that made eight row writes per notification, and at 100,000 notifications the job
-- rows were most of the database's work. Now the rows themselves are the queue:
--
--   * Ingest reads herald.notifications. A notification still 'received' waits for ingest
--     (the partial index notifications_received finds them). The ingest worker locks a
--     batch with FOR UPDATE SKIP LOCKED, ingests it and commits, in one statement
--     (herald.ingest_next). A crash rolls that back, so ingest needs no lease.
--
--   * Dispatch reads herald.deliveries. A delivery still 'queued' waits to be sent from
--     run_at on (the partial index deliveries_due). A claim leases it by moving run_at to the
--     end of the lease and naming the worker in locked_by; recording the outcome clears both.
--     A delivery whose worker died is due again when its lease ends, so the next claim, by
--     any daemon, rescues it: no separate rescue pass.
--
--       queued (locked_by NULL, due at run_at) ──claim──▶ queued (locked_by = worker, run_at = lease end)
--          ▲                                                   │
--          └───────── retry: run_at = backoff, locked_by NULL ─┤
--                                                              └──▶ sent, validated, token_invalid,
--                                                                   expired, cancelled, failed
--
--     A delivery that runs out of attempts (retries, or leases that ran out) ends 'failed'
--     with dead_at set: dead, listed in herald.dead_jobs, and herald.redrive brings it back.
--
-- Row writes per notification on the hot path: the notification's update (ingest), the
-- delivery's insert (ingest), its claim and its outcome (dispatch). herald.jobs stays for
-- delivery reports (the reconcile worker) and any kind of job a deployment adds itself.
--
-- Queued work moves over: each dispatch job's schedule, lease and attempts go to its
-- delivery, a dead dispatch job's delivery ends dead, and ingest jobs are dropped because
-- their notifications are still 'received', which is all ingest now needs. Stop the daemons
-- of the previous version before migrating.

ALTER TABLE herald.deliveries
    -- When a queued delivery is next due: send_at, a retry's backoff, or the end of its lease.
    ADD COLUMN run_at timestamptz,
    -- The worker holding the lease; NULL while nobody does.
    ADD COLUMN locked_by text,
    -- When it ran out of attempts ('failed' then); herald.redrive clears it.
    ADD COLUMN dead_at timestamptz;
ALTER TABLE herald.deliveries ALTER COLUMN run_at SET DEFAULT now();

UPDATE herald.deliveries AS d
SET run_at = CASE WHEN j.state = 'running' THEN j.locked_until ELSE j.run_at END,
    locked_by = j.locked_by,
    attempts = j.attempts
FROM herald.jobs AS j
WHERE j.kind = 'dispatch' AND j.ref = d.id AND j.state <> 'dead' AND d.state = 'queued';

UPDATE herald.deliveries AS d
SET state = 'failed', dead_at = j.dead_at, finished_at = j.dead_at, attempts = j.attempts,
    last_error = j.last_error,
    error_history = d.error_history || format('%s %s', to_char(j.dead_at, 'YYYY-MM-DD HH24:MI:SS'), j.last_error)
FROM herald.jobs AS j
WHERE j.kind = 'dispatch' AND j.ref = d.id AND j.state = 'dead' AND d.state = 'queued';

-- A queued delivery that had no job could never have been sent; now it will be.
UPDATE herald.deliveries SET run_at = now() WHERE state = 'queued' AND run_at IS NULL;

DELETE FROM herald.jobs WHERE kind IN ('ingest', 'dispatch');

ALTER TABLE herald.deliveries
    ADD CONSTRAINT "a queued delivery has a run_at" CHECK (state <> 'queued' OR run_at IS NOT NULL),
    ADD CONSTRAINT "only a failed delivery is dead" CHECK (dead_at IS NULL OR state = 'failed');

-- The dispatch claim's index: its ORDER BY, over queued deliveries only.
CREATE INDEX deliveries_due ON herald.deliveries (run_at, id) WHERE state = 'queued';
CREATE INDEX deliveries_dead ON herald.deliveries (dead_at) WHERE dead_at IS NOT NULL;

-- Every write to a delivery also writes each of its indexes, and the foreign key to its
-- device locked the device's row (a write to the devices table) for every delivery created.
-- Deliveries are made only by herald.ingest and herald.reconcile, from the device rows they
-- read in the same statement, so the key checked nothing they do not already ensure; and a
-- device is disabled, never deleted (the dispatch worker cancels a delivery whose device is
-- gone). What reads deliveries by device has partial indexes of its own
-- (deliveries_unreported, deliveries_one_pending_wakeup), so the index over every delivery
-- of a device goes too.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_device_id_fkey;
DROP INDEX herald.deliveries_by_device;

-- The dispatch worker's claim: leases up to `batch` deliveries due by `at`, oldest first, to
-- `worker` until `at + lease`, and returns each with everything needed to send it: the
-- notification's content, the device's token (and why it is disabled, if it is), the app's
-- FCM project and credentials. The lease is run_at itself: a claimed delivery is not due
-- again until its lease ends, so one whose worker died is simply due again then, and the next
-- claim, by any daemon, rescues it (`abandoned_by` names the worker that let it lapse). SKIP
-- LOCKED lets concurrent claimers take disjoint rows. The claim counts as an attempt.
--
-- One statement, so the rows it reads are as new as the rows it leases: a query around the
-- function would read with its own, older snapshot, and could see a delivery's notification
-- as it was before ingest (measured: no expiry yet, in about one run in five).
--
-- It must walk deliveries_due in order, stop after `batch` rows, and update just those rows
-- through the primary key, whatever the planner believes. Its statistics lag a sudden backlog:
-- believing few deliveries are queued, it would rather read every queued row and sort them,
-- once per claim (measured: 100,000 queued, 50 µs a delivery instead of a few); enable_sort =
-- off rules that out, for this function only. Not knowing `batch`, it would hash the whole
-- table to join the picked rows (75 µs a delivery); the array condition keeps the update on
-- the primary key.
CREATE FUNCTION herald.claim_deliveries(at timestamptz, batch int, worker text, lease interval)
RETURNS TABLE (delivery_id bigint, notification_id bigint, payload_kind text, attempts int, abandoned_by text,
               device_id bigint, push_token text, device_disabled_reason text,
               app_id text, fcm_project_id text, credentials_file text, config_error_at timestamptz,
               topic text, title text, body text, data text, image_url text, sound text, badge int,
               android_channel_id text, ios_category text, ios_thread_id text, deep_link text,
               priority text, expires_at timestamptz, collapse_key text, silent boolean, dry_run boolean)
LANGUAGE sql SET enable_sort = off AS $$
    WITH picked AS (
        SELECT d.id, d.locked_by AS abandoned_by
        FROM herald.deliveries d
        WHERE d.state = 'queued' AND d.run_at <= at
        ORDER BY d.run_at, d.id
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE herald.deliveries AS d
        SET run_at = at + lease, locked_by = worker, attempts = d.attempts + 1
        FROM picked
        WHERE d.id = ANY(ARRAY(SELECT id FROM picked)) AND d.id = picked.id
        RETURNING d.id, d.notification_id, d.device_id, d.payload_kind, d.attempts, picked.abandoned_by
    )
    SELECT c.id, c.notification_id, c.payload_kind, c.attempts, c.abandoned_by,
           c.device_id, dev.push_token,
           CASE WHEN dev.disabled_at IS NOT NULL THEN coalesce(dev.disabled_reason, 'disabled') END,
           n.app_id, a.fcm_project_id, a.credentials_file, a.config_error_at,
           n.topic, n.title, n.body, n.data::text, n.image_url, n.sound, n.badge,
           n.android_channel_id, n.ios_category, n.ios_thread_id, n.deep_link,
           n.priority, n.expires_at, n.collapse_key, n.silent, n.dry_run
    FROM claimed c
    JOIN herald.notifications n ON n.id = c.notification_id
    JOIN herald.apps a ON a.app_id = n.app_id
    LEFT JOIN herald.devices dev ON dev.id = c.device_id;
$$;
REVOKE ALL ON FUNCTION herald.claim_deliveries(timestamptz, int, text, interval) FROM PUBLIC;

-- Wake-up: one NOTIFY per inserting statement, with the worker's name as payload, on the
-- channel the job queue uses. PostgreSQL folds identical notifications within a transaction,
-- so a producer's transaction sends at most one however many rows it inserts. The triggers do
-- not look at the rows (a transition table would copy every one of them): a wake-up for rows
-- due later, or already ingested, costs a claim that finds nothing.
DROP TRIGGER notifications_enqueue_ingest ON herald.notifications;
DROP FUNCTION herald.enqueue_ingest();

CREATE FUNCTION herald.notify_worker() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('herald_jobs', TG_ARGV[0]);
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.notify_worker() FROM PUBLIC;
CREATE TRIGGER notifications_notify_ingest
    AFTER INSERT ON herald.notifications
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('ingest');
CREATE TRIGGER deliveries_notify_dispatch
    AFTER INSERT ON herald.deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('dispatch');

-- 009's single pass, with the deliveries queued in place (run_at) instead of dispatch jobs.
-- Callers lock nothing themselves; this takes the rows it ingests.
CREATE OR REPLACE FUNCTION herald.ingest(ids bigint[], at timestamptz DEFAULT now())
RETURNS TABLE (accepted int, rejected int, expired int, no_devices int, deliveries int)
LANGUAGE plpgsql AS $$
BEGIN
    -- Lock the batch in id order, so concurrent ingesters cannot deadlock.
    PERFORM 1 FROM herald.notifications n WHERE n.id = ANY(ids) AND n.state = 'received' ORDER BY n.id FOR UPDATE;

    RETURN QUERY
    WITH normalized AS MATERIALIZED (
        SELECT n.id, n.app_id, n.user_ref, n.device_ids, n.topic, n.silent,
               -- The app's defaults; a ttl becomes the absolute expires_at it implies.
               coalesce(n.priority, a.default_priority) AS priority,
               coalesce(n.expires_at, n.created_at + coalesce(n.ttl, a.default_ttl)) AS expires_at,
               greatest(at, coalesce(n.send_at, at)) AS run_at,
               entries.data,
               CASE
                   WHEN a.app_id IS NULL THEN
                       format('unknown app %s: add it to herald.apps, or fix app_id', quote_literal(n.app_id))
                   WHEN NOT n.silent AND coalesce(n.title, '') = '' AND coalesce(n.body, '') = ''
                        AND (n.data IS NULL OR n.data = '{}'::jsonb) THEN
                       'nothing to send: give a title, a body or data (or set silent for a bare wake-up)'
                   WHEN n.data IS NOT NULL AND jsonb_typeof(n.data) <> 'object' THEN
                       format('data must be a JSON object of strings, not a JSON %s', jsonb_typeof(n.data))
                   WHEN entries.data_problem IS NOT NULL THEN entries.data_problem
                   WHEN n.image_url IS NOT NULL AND n.image_url NOT LIKE 'https://%' THEN
                       format('image_url must be an https:// URL, not %s', quote_literal(left(n.image_url, 80)))
                   WHEN n.device_ids IS NOT NULL AND cardinality(n.device_ids) = 0 THEN
                       'device_ids is empty: name at least one device'
                   WHEN size.bytes > size.limit_bytes THEN
                       format('payload is about %s bytes once encoded, %s over FCM''s %s-byte limit; shorten the title, body or data',
                              size.bytes, size.bytes - size.limit_bytes, size.limit_bytes)
               END AS problem
        FROM herald.notifications n
        LEFT JOIN herald.apps a ON a.app_id = n.app_id
        -- One walk over the data's entries: numbers and booleans become strings (FCM takes
        -- only strings), and the first entry FCM would refuse is named.
        CROSS JOIN LATERAL (
            SELECT CASE WHEN jsonb_typeof(n.data) = 'object'
                        THEN coalesce(jsonb_object_agg(e.key, CASE WHEN jsonb_typeof(e.value) IN ('number', 'boolean')
                                                                   THEN to_jsonb(e.value #>> '{}') ELSE e.value END),
                                      '{}'::jsonb)
                        ELSE n.data END AS data,
                   (array_agg(
                        CASE WHEN jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean') THEN
                                 format('data value for key %s is a JSON %s; data values must be strings (numbers and booleans are converted)',
                                        quote_literal(e.key), jsonb_typeof(e.value))
                             ELSE format('data key %s is reserved by FCM (from, message_type, google.*, gcm.*); rename it',
                                         quote_literal(e.key))
                        END ORDER BY e.position)
                    FILTER (WHERE jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean')
                                  OR herald.is_reserved_data_key(e.key)))[1] AS data_problem
            FROM jsonb_each(CASE WHEN jsonb_typeof(n.data) = 'object' THEN n.data END)
                 WITH ORDINALITY AS e(key, value, position)
        ) AS entries
        -- An estimate of the bytes FCM counts: the Android data map, which carries the content
        -- plus Herald's own keys and is the larger of the two platforms' payloads.
        CROSS JOIN LATERAL (
            SELECT octet_length(
                       (coalesce(entries.data, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
                           'title', n.title, 'body', n.body, 'image_url', n.image_url, 'deep_link', n.deep_link,
                           'sound', n.sound, 'channel_id', n.android_channel_id)))::text)
                   + 160 AS bytes,  -- herald_notification_id, herald_report and their quoting
                   CASE WHEN n.topic IS NULL THEN 4096 ELSE 2048 END AS limit_bytes
        ) AS size
        WHERE n.id = ANY(ids) AND n.state = 'received'
    ), live AS (
        SELECT * FROM normalized WHERE problem IS NULL AND expires_at > run_at
    ), targets AS (
        SELECT l.id AS notification_id, d.id AS device_id, d.platform, l.silent, l.run_at
        FROM live l
        JOIN herald.devices d ON d.app_id = l.app_id AND d.user_ref = l.user_ref AND d.disabled_at IS NULL
        WHERE l.user_ref IS NOT NULL
        UNION ALL
        SELECT l.id, d.id, d.platform, l.silent, l.run_at
        FROM live l
        CROSS JOIN LATERAL (SELECT DISTINCT unnest(l.device_ids) AS device_id) AS wanted
        JOIN herald.devices d ON d.app_id = l.app_id AND d.device_id = wanted.device_id AND d.disabled_at IS NULL
        WHERE l.device_ids IS NOT NULL
        UNION ALL
        SELECT l.id, NULL, NULL, l.silent, l.run_at FROM live l WHERE l.topic IS NOT NULL
    ), created AS (
        -- Each delivery is queued in place, due at send_at or now.
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at)
        SELECT t.notification_id, t.device_id,
               CASE WHEN t.platform IS NULL THEN 'topic'
                    WHEN t.platform = 'android' THEN 'android_data'
                    WHEN t.silent THEN 'ios_background'
                    ELSE 'ios_alert' END,
               t.run_at
        FROM targets t
        -- In notification order, so a later notification's deliveries have larger ids.
        ORDER BY t.notification_id, t.device_id
        RETURNING notification_id
    ), verdicts AS MATERIALIZED (
        -- The planner cannot know how many rows these CTEs hold, and a join or IN against
        -- `created` was planned as a rescan per row, quadratic in the batch; an array searched
        -- per row costs a few microseconds a batch.
        SELECT v.*,
               CASE WHEN v.problem IS NOT NULL THEN 'rejected'
                    WHEN v.expires_at <= v.run_at THEN 'expired'
                    WHEN v.id = ANY(ARRAY(SELECT c.notification_id FROM created c)) THEN 'accepted'
                    ELSE 'no_devices' END AS state
        FROM normalized v
    ), written AS (
        -- A rejected notification keeps what the producer wrote; the others get the defaults.
        UPDATE herald.notifications n
        SET state = v.state,
            reason = CASE v.state
                         WHEN 'rejected' THEN v.problem
                         WHEN 'expired' THEN format('expired at %s, before it could be sent', v.expires_at)
                         WHEN 'no_devices' THEN
                             CASE WHEN v.user_ref IS NOT NULL
                                  THEN format('user %s has no enabled device', quote_literal(v.user_ref))
                                  ELSE format('none of the devices %s is registered and enabled',
                                              array_to_string(v.device_ids, ', '))
                             END
                     END,
            priority = CASE WHEN v.state = 'rejected' THEN n.priority ELSE v.priority END,
            expires_at = CASE WHEN v.state = 'rejected' THEN n.expires_at ELSE v.expires_at END,
            ttl = CASE WHEN v.state = 'rejected' THEN n.ttl END,
            data = CASE WHEN v.state = 'rejected' THEN n.data ELSE v.data END,
            ingested_at = at
        FROM verdicts v
        -- The array condition keeps the plan on the primary key, not a scan of the whole table.
        WHERE n.id = ANY(ids) AND n.id = v.id
        RETURNING n.state
    )
    SELECT count(*) FILTER (WHERE w.state = 'accepted')::int,
           count(*) FILTER (WHERE w.state = 'rejected')::int,
           count(*) FILTER (WHERE w.state = 'expired')::int,
           count(*) FILTER (WHERE w.state = 'no_devices')::int,
           (SELECT count(*) FROM created)::int
    FROM written w;
END;
$$;

-- The ingest worker's step: takes up to `batch` notifications waiting for ingest, oldest
-- first, skipping those another ingester holds, and ingests them. The counts add up to how
-- many it took; fewer than `batch` means none was left.
CREATE FUNCTION herald.ingest_next(batch int, at timestamptz DEFAULT now())
RETURNS TABLE (accepted int, rejected int, expired int, no_devices int, deliveries int)
LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
BEGIN
    SELECT array_agg(picked.id) INTO ids
    FROM (SELECT n.id FROM herald.notifications n WHERE n.state = 'received'
          ORDER BY n.id LIMIT batch FOR UPDATE SKIP LOCKED) AS picked;
    IF ids IS NULL THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0;
    ELSE
        RETURN QUERY SELECT * FROM herald.ingest(ids, at);
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest_next(int, timestamptz) FROM PUBLIC;

-- 007's reconcile, with the wake-up's delivery queued in place instead of a dispatch job.
CREATE OR REPLACE FUNCTION herald.reconcile(report_ids bigint[], at timestamptz DEFAULT now(),
                                            quiet interval DEFAULT interval '30 minutes',
                                            grace interval DEFAULT interval '1 minute',
                                            fetch_window interval DEFAULT interval '3 days')
RETURNS TABLE (reports int, delivered int, wakeups int)
LANGUAGE plpgsql AS $$
DECLARE
    applied int;
    marked int;
    woken int := 0;
    candidate record;
    wakeup_id bigint;
    new_notification bigint;
BEGIN
    WITH batch AS (
        SELECT r.delivery_id,
               min(r.reported_at) AS delivered_at,
               min(r.reported_at) FILTER (WHERE r.report_kind IN ('seen', 'opened')) AS seen_at,
               min(r.reported_at) FILTER (WHERE r.report_kind = 'opened') AS opened_at
        FROM herald.delivery_reports r
        WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL
        GROUP BY r.delivery_id
    )
    UPDATE herald.deliveries d
    SET state = 'delivered',
        delivered_at = least(d.delivered_at, b.delivered_at, b.seen_at),
        seen_at = coalesce(d.seen_at, b.seen_at),
        opened_at = coalesce(d.opened_at, b.opened_at),
        finished_at = coalesce(d.finished_at, at),
        run_at = NULL, locked_by = NULL, dead_at = NULL
    FROM batch b
    WHERE d.id = b.delivery_id;
    GET DIAGNOSTICS marked = ROW_COUNT;

    FOR candidate IN
        SELECT dev.id AS device, dev.app_id, dev.device_id, max(r.id) AS report_id, count(DISTINCT gap.id) AS missed
        FROM herald.delivery_reports r
        JOIN herald.devices dev ON dev.id = r.device_id AND dev.platform = 'ios' AND dev.disabled_at IS NULL
        JOIN herald.deliveries reported ON reported.id = r.delivery_id
        JOIN herald.deliveries gap ON gap.device_id = dev.id AND gap.payload_kind = 'ios_alert'
             AND gap.state = 'sent' AND gap.id < reported.id
             AND gap.sent_at <= at - grace AND gap.sent_at > at - fetch_window
        WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL
        GROUP BY dev.id, dev.app_id, dev.device_id
        ORDER BY dev.id
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM herald.deliveries d
                              WHERE d.device_id = candidate.device AND d.payload_kind = 'ios_wakeup'
                                AND d.state = 'queued');
        INSERT INTO herald.wakeups (device_id, report_id, missed, created_at, quiet_until)
        VALUES (candidate.device, candidate.report_id, candidate.missed, at, at + quiet)
        ON CONFLICT DO NOTHING
        RETURNING id INTO wakeup_id;
        CONTINUE WHEN wakeup_id IS NULL;
        INSERT INTO herald.notifications (app_id, device_ids, silent, priority, expires_at, origin, state,
                                          reason, ingested_at, idempotency_key)
        VALUES (candidate.app_id, ARRAY[candidate.device_id], true, 'normal', at + quiet, 'wakeup', 'accepted',
                format('wake-up: %s sent notifications were not reported', candidate.missed), at,
                'herald-wakeup-' || wakeup_id)
        RETURNING id INTO new_notification;
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at)
        VALUES (new_notification, candidate.device, 'ios_wakeup', at);
        UPDATE herald.wakeups SET notification_id = new_notification WHERE id = wakeup_id;
        UPDATE herald.devices SET last_wakeup_at = at WHERE id = candidate.device;
        woken := woken + 1;
    END LOOP;

    UPDATE herald.delivery_reports r
    SET processed_at = at, outcome = 'applied'
    WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL;
    GET DIAGNOSTICS applied = ROW_COUNT;
    RETURN QUERY SELECT applied, marked, woken;
END;
$$;

-- How deep each queue is: notifications waiting for ingest, deliveries waiting to be sent,
-- and herald.jobs by kind, with the same columns as before. A kind appears while it has work.
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

-- The journey shows when a queued delivery is next due, and when a dead one gave up.
CREATE OR REPLACE VIEW herald.notification_journey AS
SELECT n.id AS notification_id, n.app_id, n.idempotency_key,
       coalesce('user ' || n.user_ref, 'devices ' || array_to_string(n.device_ids, ','), 'topic ' || n.topic) AS target,
       n.state AS notification_state, n.reason AS notification_reason, n.created_at, n.ingested_at, n.expires_at,
       d.id AS delivery_id, dev.device_id, dev.platform, herald.token_hint(dev.push_token) AS token_hint,
       d.payload_kind, d.state AS delivery_state, d.attempts, d.last_error, d.provider_message_id,
       d.sent_at, d.delivered_at, d.finished_at,
       dev.disabled_cause AS device_disabled_cause, dev.disabled_at AS device_disabled_at,
       d.error_history,
       CASE WHEN d.state = 'queued' THEN d.run_at END AS next_attempt_at, d.dead_at
FROM herald.notifications n
LEFT JOIN herald.deliveries d ON d.notification_id = n.id
LEFT JOIN herald.devices dev ON dev.id = d.device_id;

ALTER TABLE herald.redrives ADD COLUMN delivery_ids bigint[] NOT NULL DEFAULT '{}';

-- Brings dead work back, with its attempts reset, and records the redrive:
--   * jobs by id (job_ids), or every dead job of a kind that died since a time;
--   * dead deliveries by id (delivery_ids), or with kind => 'dispatch' every one that died
--     since a time.
-- Returns how many came back.
--   SELECT herald.redrive(job_ids => '{101,102}');
--   SELECT herald.redrive(delivery_ids => '{5001}');
--   SELECT herald.redrive(kind => 'dispatch', since => now() - interval '1 hour', note => 'FCM outage');
DROP FUNCTION herald.redrive(bigint[], text, timestamptz, text);
CREATE FUNCTION herald.redrive(job_ids bigint[] DEFAULT NULL, kind text DEFAULT NULL, since timestamptz DEFAULT NULL,
                               note text DEFAULT NULL, delivery_ids bigint[] DEFAULT NULL)
RETURNS int
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
              AND (redrive.since IS NULL OR d.dead_at >= redrive.since)
            RETURNING d.id
        )
        SELECT coalesce(array_agg(id ORDER BY id), '{}') INTO revived_deliveries FROM revived;
    END IF;
    IF cardinality(revived_jobs) + cardinality(revived_deliveries) > 0 THEN
        INSERT INTO herald.redrives (job_ids, delivery_ids, note) VALUES (revived_jobs, revived_deliveries, redrive.note);
        PERFORM pg_notify('herald_jobs', k)
        FROM (SELECT DISTINCT j.kind AS k FROM herald.jobs j WHERE j.id = ANY(revived_jobs)) AS kinds;
        IF cardinality(revived_deliveries) > 0 THEN
            PERFORM pg_notify('herald_jobs', 'dispatch');
        END IF;
    END IF;
    RETURN cardinality(revived_jobs) + cardinality(revived_deliveries);
END;
$$;
REVOKE ALL ON FUNCTION herald.redrive(bigint[], text, timestamptz, text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.redrive(bigint[], text, timestamptz, text, bigint[]) TO herald_operator;
