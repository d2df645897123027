-- reconcile: the reports apps send back with their delivery references (herald.open_reference;
-- dispatch.sql makes them), the pending fetch (herald.report_delivery,
-- herald.pending_notifications), the reconcile worker's step, the providers' receipts
-- (herald.record_receipts), and what a backend reads of its devices and notifications
-- (herald.device_states, herald.notification_path).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- The delivery and device a reference names; both NULL when it is malformed or forged.
CREATE OR REPLACE FUNCTION herald.open_reference(reference text, OUT delivery_id bigint, OUT device_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    raw bytea;
    secret herald.secrets := (SELECT s FROM herald.secrets s WHERE s.name = 'report_hmac');
BEGIN
    IF reference IS NULL OR reference !~ '^[A-Za-z0-9_-]{43}$' THEN
        RETURN;
    END IF;
    raw := decode(translate(reference, '-_', '+/') || '=', 'base64');
    -- IS DISTINCT FROM: without the secret the tag is NULL, and nothing opens.
    IF substring(raw FROM 17) IS DISTINCT FROM herald.reference_tag(substring(raw FROM 1 FOR 16), secret.inner_pad,
                                                                     secret.outer_pad) THEN
        RETURN;
    END IF;
    delivery_id := ('x' || encode(substring(raw FROM 1 FOR 8), 'hex'))::bit(64)::bigint;
    device_id := ('x' || encode(substring(raw FROM 9 FOR 8), 'hex'))::bit(64)::bigint;
END;
$$;
REVOKE ALL ON FUNCTION herald.open_reference(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.open_reference(text) TO herald_daemon;

-- How far back a woken device's missed notifications are looked for: by reconcile, which
-- wakes a device only for what it could still fetch, and by the pending fetch when the app
-- gives no `since`. Herald's code reads it from here.
CREATE OR REPLACE FUNCTION herald.fetch_window() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '3 days' $$;
REVOKE ALL ON FUNCTION herald.fetch_window() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.fetch_window() TO PUBLIC;
GRANT EXECUTE ON FUNCTION herald.fetch_window() TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.fetch_window() TO herald_producer;

-- Records a report from an app. Cheap: checks the reference and inserts; the reconcile worker
-- applies reports in batches. `kind` is 'delivered', 'seen' or 'opened'; `device`, when given,
-- is the app's own device id and must be the one the reference was issued to.
--
-- outcome is one of:
--   accepted           recorded; the reconcile worker applies it shortly
--   already_reported   this delivery already has a report of this kind: nothing changes
--   invalid_reference  not a reference this Herald issued (forged, truncated or mistyped)
--   unknown_delivery   a genuine reference whose delivery no longer exists (pruned)
--   wrong_device       the reference belongs to another device
--   invalid_kind       kind is not delivered, seen or opened
--   SELECT * FROM herald.report_delivery('q1w2…', 'delivered', 'phone-1');
CREATE OR REPLACE FUNCTION herald.report_delivery(reference text, kind text DEFAULT 'delivered',
    device text DEFAULT NULL, OUT accepted boolean, OUT outcome text, OUT message text) RETURNS record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    opened record;
    owner herald.devices;
    report_id bigint;
BEGIN
    accepted := false;
    IF kind IS NULL OR kind NOT IN ('delivered', 'seen', 'opened') THEN
        outcome := 'invalid_kind';
        message := format('kind must be delivered, seen or opened, not %s', coalesce(quote_literal(kind), 'NULL'));
        RETURN;
    END IF;
    opened := herald.open_reference(reference);
    IF opened.delivery_id IS NULL THEN
        outcome := 'invalid_reference';
        message := 'the reference was not issued by this Herald: send herald_report from the payload unchanged';
        RETURN;
    END IF;
    SELECT dev.* INTO owner FROM herald.devices dev WHERE dev.id = opened.device_id;
    IF owner.app_id IS NOT NULL AND NOT herald.acts_for(owner.app_id) THEN
        -- Said exactly as for a forged reference: another app's devices are invisible.
        outcome := 'invalid_reference';
        message := 'the reference was not issued by this Herald: send herald_report from the payload unchanged';
        RETURN;
    END IF;
    IF device IS NOT NULL AND owner.device_id IS DISTINCT FROM device THEN
        outcome := 'wrong_device';
        message := format('the reference belongs to another device than %s', quote_literal(device));
        RETURN;
    END IF;
    -- Beside its delivery: in its generation, or kept with it (migration 022). The delivery is
    -- locked until this commits, so retirement cannot move it to the kept side under the report;
    -- one it moved just before is read again where it went.
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            INSERT INTO herald.delivery_reports (reference, report_kind, delivery_id, device_id, kept)
            SELECT reference, kind, d.id, d.device_id, d.kept
            FROM herald.deliveries d
            WHERE d.id = opened.delivery_id AND d.device_id = opened.device_id
            FOR KEY SHARE
            ON CONFLICT (delivery_id, report_kind, kept) DO NOTHING
            RETURNING id INTO report_id;
            EXIT;
        EXCEPTION WHEN serialization_failure THEN
            IF attempt = 3 THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    IF report_id IS NOT NULL THEN
        accepted := true;
        outcome := 'accepted';
        message := format('%s report recorded', kind);
    ELSIF EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.id = opened.delivery_id) THEN
        outcome := 'already_reported';
        message := format('this delivery was already reported %s; nothing changed', kind);
    ELSE
        outcome := 'unknown_delivery';
        message := 'no such delivery: it was pruned after the retention period, or never existed';
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.report_delivery(text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.report_delivery(text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.report_delivery(text,text,text) TO herald_daemon;

-- What `device` missed since `since`, in its current registration: each notification sent to
-- it and not reported (a report on its way counts as made), and each held for room in its
-- store at the provider (herald.fill_device_stores), with the reference to report it by. Alerts
-- and data messages only: silent ones, wake-ups and other push types are not shown later.
CREATE OR REPLACE FUNCTION herald.missed_deliveries(device herald.devices, since timestamptz)
RETURNS TABLE (cursor bigint, notification_id bigint, report_reference text, title text, body text, data jsonb,
               image_url text, deep_link text, created_at timestamptz, sent_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT d.id, n.id, herald.delivery_reference(d.id, d.device_id), n.title, n.body, n.data, n.image_url,
           n.deep_link, d.created_at, d.sent_at
    FROM (SELECT d.* FROM herald.deliveries d
          WHERE d.device_id = device.id AND d.state = 'sent' AND d.sent_at >= since
          UNION ALL
          SELECT d.* FROM herald.deliveries d
          WHERE d.device_id = device.id AND d.state = 'queued' AND d.sent_at IS NULL AND d.held_since IS NOT NULL
            AND d.created_at >= since) d
    JOIN herald.notifications n ON n.id = d.notification_id
    WHERE d.payload_kind IN ('ios_alert', 'android_data', 'harmony_alert', 'web') AND NOT n.silent
      AND d.created_at >= device.registration_started_at
      -- One held until a later send_at is not missed yet.
      AND (d.state = 'sent' OR coalesce(n.send_at, '-infinity') <= now())
      AND NOT EXISTS (SELECT FROM herald.delivery_reports r WHERE r.delivery_id = d.id)
$$;
REVOKE ALL ON FUNCTION herald.missed_deliveries(herald.devices,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.missed_deliveries(herald.devices,timestamp with time zone) TO herald_daemon;

-- What a woken app missed: the notifications sent to the reference's device and never
-- reported, newest first, each with its own reference so the app can report it once shown.
-- Any reference the device received (the wake-up's own, for one) identifies it, for as long
-- as its delivery exists and the device's registration that received it lasts: not after a
-- logout, nor once the device is registered for another user. It reads only what was sent
-- to that registration. `since` defaults to herald.fetch_window() ago.
--   SELECT * FROM herald.pending_notifications('q1w2…');
CREATE OR REPLACE FUNCTION herald.pending_notifications(reference text,
    since timestamptz DEFAULT (now() - herald.fetch_window()), max_count integer DEFAULT 20, device text DEFAULT NULL) RETURNS TABLE (
    notification_id bigint, report_reference text, title text, body text, data jsonb, image_url text, deep_link text,
    sent_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    opened record;
    owner herald.devices;
    issued_at timestamptz;
BEGIN
    opened := herald.open_reference(reference);
    SELECT dev.* INTO owner FROM herald.devices dev WHERE dev.id = opened.device_id;
    IF owner.id IS NULL OR NOT herald.acts_for(owner.app_id) THEN
        RAISE EXCEPTION 'herald.pending_notifications: the reference was not issued by this Herald'
            USING ERRCODE = 'invalid_authorization_specification',
                  HINT = 'pass herald_report from a payload this device received, unchanged';
    END IF;
    SELECT d.created_at INTO issued_at FROM herald.deliveries d
    WHERE d.id = opened.delivery_id AND d.device_id = opened.device_id;
    -- One message for each case, so a reference tells its holder nothing about the device.
    IF issued_at IS NULL OR issued_at < owner.registration_started_at OR owner.disabled_cause = 'logout' THEN
        RAISE EXCEPTION 'herald.pending_notifications: the reference is no longer valid: its delivery was pruned, or the device logged out or was registered again for another user since'
            USING ERRCODE = 'invalid_authorization_specification',
                  HINT = 'pass herald_report from a payload this device received since it registered';
    END IF;
    IF device IS NOT NULL AND owner.device_id IS DISTINCT FROM device THEN
        RAISE EXCEPTION 'herald.pending_notifications: the reference belongs to another device than %',
            quote_literal(device) USING ERRCODE = 'invalid_authorization_specification';
    END IF;
    IF max_count IS NULL OR max_count < 1 OR max_count > 100 THEN
        RAISE EXCEPTION 'herald.pending_notifications: max_count must be from 1 to 100, not %', max_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT m.notification_id, m.report_reference, m.title, m.body, m.data, m.image_url, m.deep_link, m.sent_at
    FROM herald.missed_deliveries(owner, coalesce(since, '-infinity')) m
    ORDER BY coalesce(m.sent_at, m.created_at) DESC, m.cursor DESC
    LIMIT max_count;
END;
$$;
REVOKE ALL ON FUNCTION herald.pending_notifications(text,timestamp with time zone,integer,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.pending_notifications(text,timestamp with time zone,integer,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.pending_notifications(text,timestamp with time zone,integer,text) TO herald_daemon;

-- What a device missed, for the app's backend to hand to its app, which may have nothing to ask
-- with: FCM told it only that messages were deleted, or it received nothing. The backend has
-- authenticated its user and knows the device. Returns the notifications sent to the device's
-- current registration within herald.fetch_window() that the app has not reported, and those
-- held for it while its store at FCM was full, oldest first, `max_count` (1 to 100) a page, and
-- notes each as fetched. Pass the last row's `cursor` as `after` for the next page: that call
-- first marks the rows returned before, up to the cursor, delivered, so they are never sent or
-- returned again; a page whose answer was lost comes back, and the call after the last page
-- marks it and returns nothing. A fetched row still held is not released to be sent meanwhile
-- (the device's lock keeps the two apart); one the provider already holds may still arrive.
-- A device that logged out fetches nothing until it registers again.
--   SELECT * FROM herald.missed_notifications('shop', 'phone-1');
--   SELECT * FROM herald.missed_notifications('shop', 'phone-1', after => 4294967307);
CREATE OR REPLACE FUNCTION herald.missed_notifications(app text, device text, after bigint DEFAULT NULL,
    max_count integer DEFAULT 100) RETURNS TABLE (cursor bigint, notification_id bigint, report_reference text,
    title text, body text, data jsonb, image_url text, deep_link text, created_at timestamptz, sent_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    owner herald.devices;
    since timestamptz := now() - herald.fetch_window();
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.missed_notifications');
    IF max_count IS NULL OR max_count < 1 OR max_count > 100 THEN
        RAISE EXCEPTION 'herald.missed_notifications: max_count must be from 1 to 100, not %', max_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT dev.* INTO owner FROM herald.devices dev WHERE dev.app_id = app AND dev.device_id = device;
    IF owner.id IS NULL THEN
        RAISE EXCEPTION 'herald.missed_notifications: app % has no device %', quote_literal(app), quote_literal(device)
            USING ERRCODE = 'no_data_found', HINT = 'pass the device id the app registered with herald.register_device';
    END IF;
    IF owner.disabled_cause = 'logout' THEN
        RAISE EXCEPTION 'herald.missed_notifications: device % logged out: it fetches nothing until it registers again',
            quote_literal(device) USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM herald.lock_device_stores(ARRAY[owner.id]);
    IF after IS NOT NULL THEN
        UPDATE herald.deliveries d
        SET state = 'delivered', delivered_at = coalesce(d.delivered_at, now()),
            finished_at = coalesce(d.finished_at, now()), run_at = NULL, locked_by = NULL, last_error = NULL
        FROM (SELECT m.cursor FROM herald.missed_deliveries(owner, since) m WHERE m.cursor <= after) m
        WHERE d.id = ANY(ARRAY[m.cursor]) AND d.fetched_at IS NOT NULL AND d.state IN ('sent', 'queued');
    END IF;
    RETURN QUERY
    WITH page AS (
        SELECT m.* FROM herald.missed_deliveries(owner, since) m
        WHERE m.cursor > coalesce(after, 0)
        ORDER BY m.cursor
        LIMIT max_count
    ), noted AS (
        UPDATE herald.deliveries d SET fetched_at = now()
        FROM page p
        WHERE d.id = ANY(ARRAY[p.cursor]) AND d.fetched_at IS NULL
    )
    SELECT p.* FROM page p ORDER BY p.cursor;
END;
$$;
REVOKE ALL ON FUNCTION herald.missed_notifications(text,text,bigint,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.missed_notifications(text,text,bigint,integer) TO herald_producer;

-- The state of an app's devices, for its backend: whether each is enabled, and if not since when
-- and why; when it registered and when the app last reported a delivery to it; how many
-- notifications were sent to it in herald.fetch_window() that it has not reported, and when the
-- latest of them was sent (a device sent to but silent for long is likely gone: an app that
-- reports, uninstalled); and its token as logs show one, never the token. The devices named, or
-- the users', or all of the app's. Only for an app the session acts for.
--   SELECT * FROM herald.device_states('shop', user_refs => '{alice}');
CREATE OR REPLACE FUNCTION herald.device_states(app text, device_ids text[] DEFAULT NULL, user_refs text[] DEFAULT NULL)
RETURNS TABLE (device_id text, user_ref text, platform text, enabled boolean, disabled_cause text,
               disabled_reason text, disabled_at timestamptz, registered_at timestamptz, last_reported_at timestamptz,
               unreported bigint, last_unreported_at timestamptz, token_hint text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.device_states');
    RETURN QUERY
    SELECT d.device_id, d.user_ref, d.platform, d.disabled_at IS NULL, d.disabled_cause, d.disabled_reason,
           d.disabled_at, d.registered_at, d.last_reported_at, u.unreported, u.last_unreported_at,
           herald.token_hint(d.push_token)
    FROM herald.devices d
    -- Through the device's index of sent deliveries (deliveries_unreported).
    CROSS JOIN LATERAL (SELECT count(*) AS unreported, max(s.sent_at) AS last_unreported_at
                        FROM herald.deliveries s
                        WHERE s.device_id = d.id AND s.state = 'sent' AND s.sent_at > now() - herald.fetch_window()
                          AND s.payload_kind <> 'android_wakeup') u
    WHERE d.app_id = app
      AND (device_states.device_ids IS NULL OR d.device_id = ANY(device_states.device_ids))
      AND (device_states.user_refs IS NULL OR d.user_ref = ANY(device_states.user_refs))
    ORDER BY d.device_id;
END;
$$;
REVOKE ALL ON FUNCTION herald.device_states(text,text[],text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.device_states(text,text[],text[]) TO herald_producer;

-- Each new report gets a reconcile job, in the reporting transaction.
CREATE OR REPLACE FUNCTION herald.enqueue_reconcile() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO herald.jobs (kind, ref) SELECT 'reconcile', id FROM new_reports;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.enqueue_reconcile() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.enqueue_reconcile() TO herald_daemon;

-- Applies a batch of reports (the reconcile worker calls it; running it twice changes nothing):
--
-- 1. Each reported delivery becomes 'delivered' (first report wins); 'seen' and 'opened'
--    record their time too, and imply delivered. Each reporting device records when it last
--    reported, and has what waits for room in its store at the provider released.
-- 2. An iOS device whose report reveals earlier deliveries that were sent but never reported
--    was offline, and APNs kept only the newest: it gets one wake-up, a background push that
--    makes the app fetch what it missed, as a delivery queued in place. Deliveries sent within
--    `grace` of `at` do not count (their reports may still be on their way), nor those older
--    than `fetch_window`. The exclusion constraint on herald.wakeups keeps it to one per
--    device per `quiet` period, across all daemons, and none is made while one is queued
--    (found through deliveries_pending_wakeup).
-- `quiet` and `grace` are the reconcile worker's settings (HERALD_WAKEUP_INTERVAL), whose home
-- is its configuration: they have no default here.
CREATE OR REPLACE FUNCTION herald.reconcile(report_ids bigint[], at timestamptz, quiet interval, grace interval,
                                            fetch_window interval DEFAULT herald.fetch_window())
RETURNS TABLE (reports int, delivered int, wakeups int)
LANGUAGE plpgsql
-- One plan per session, with nothing but index probes and nested loops, and every lookup of
-- another table a LATERAL probe fenced with OFFSET 0, as in herald.claim_batch: a plan made on
-- empty tables read every delivery of a grown day once per call (PlanningTests). A row another
-- session holds locked is waited for half a second at most (docs/architecture.md, "Producers
-- beside the workers").
SET plan_cache_mode TO 'force_generic_plan' SET enable_seqscan TO 'off' SET enable_hashjoin TO 'off'
SET enable_mergejoin TO 'off' SET jit TO 'off' SET lock_timeout TO '500ms'
AS $$
DECLARE
    applied int;
    marked int;
    woken int := 0;
    candidate record;
    wakeup_id bigint;
    new_notification bigint;
    waiting bigint[];
BEGIN
    -- The reporting devices that have deliveries held for room in their store at the provider
    -- (herald.fill_device_stores): locked first, before any of their rows, as ingest locks them.
    SELECT array_agg(DISTINCT r.device_id) INTO waiting
    FROM herald.delivery_reports r
    WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL
      AND EXISTS (SELECT FROM herald.deliveries h
                  WHERE h.device_id = r.device_id AND h.state = 'queued' AND h.held_since IS NOT NULL
                    AND h.sent_at IS NULL);
    IF waiting IS NOT NULL THEN
        PERFORM herald.lock_device_stores(waiting);
    END IF;

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
        -- One the app reported while it was held (its reference came from a fetch) waits no more.
        last_error = CASE WHEN d.state = 'queued' AND d.held_since IS NOT NULL THEN NULL ELSE d.last_error END,
        run_at = NULL, locked_by = NULL, dead_at = NULL
    FROM batch b
    WHERE d.id = ANY(ARRAY[b.delivery_id]);
    GET DIAGNOSTICS marked = ROW_COUNT;

    FOR candidate IN
        SELECT dev.id AS device, dev.app_id, dev.device_id, max(r.id) AS report_id, count(DISTINCT gap.id) AS missed
        FROM herald.delivery_reports r
        CROSS JOIN LATERAL (SELECT dev.id, dev.app_id, dev.device_id FROM herald.devices dev
                            WHERE dev.id = r.device_id AND dev.platform = 'ios' AND dev.disabled_at IS NULL
                            OFFSET 0) dev
        CROSS JOIN LATERAL (SELECT reported.id FROM herald.deliveries reported WHERE reported.id = r.delivery_id
                            OFFSET 0) reported
        -- The device's own sends within the window, through its index of sent deliveries.
        CROSS JOIN LATERAL (SELECT gap.id FROM herald.deliveries gap
                            WHERE gap.device_id = dev.id AND gap.state = 'sent' AND gap.payload_kind = 'ios_alert'
                              AND gap.id < reported.id
                              AND gap.sent_at <= at - grace AND gap.sent_at > at - fetch_window
                            OFFSET 0) gap
        WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL
        GROUP BY dev.id, dev.app_id, dev.device_id
        ORDER BY dev.id
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM herald.deliveries d
                              WHERE d.device_id = candidate.device AND d.payload_kind = 'ios_wakeup'
                                AND d.state = 'queued');
        -- Within a quiet period already taken (the usual case), nothing more to do or to wait for.
        CONTINUE WHEN EXISTS (SELECT 1 FROM herald.wakeups w
                              WHERE int8range(w.device_id, w.device_id, '[]') && int8range(candidate.device, candidate.device, '[]')
                                AND tstzrange(w.created_at, w.quiet_until) && tstzrange(at, at + quiet));
        -- The device's row before its wake-up, in id order, and before this batch holds any other
        -- device's row but those waiting above: a daemon that inserted a wake-up and then waited
        -- for the device's row, held by another applying a report of the same device, would
        -- deadlock with it as that one waited for the wake-up's fate.
        PERFORM FROM herald.devices dev WHERE dev.id = candidate.device FOR NO KEY UPDATE;
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

    -- When each device last reported, to the minute: a device that reports has its deliveries
    -- counted in its store at the provider (ingest's stored_until), from the time it last
    -- reported (herald.stored_messages). A row another transaction holds is left for the next
    -- report, rather than waited for: these locks come after the wake-ups', which are waited for
    -- in id order, so two batches never hold each other's devices.
    UPDATE herald.devices dev
    SET last_reported_at = b.reported_at
    FROM (SELECT r.device_id, max(r.reported_at) AS reported_at FROM herald.delivery_reports r
          WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL GROUP BY r.device_id) b
    WHERE dev.id = ANY(ARRAY(SELECT free.id FROM herald.devices free
                             WHERE free.id = b.device_id
                               AND (free.last_reported_at IS NULL OR free.last_reported_at < b.reported_at - interval '1 minute')
                             FOR NO KEY UPDATE SKIP LOCKED));

    -- A report releases what waits for room in the device's store: under the device's lock, a
    -- statement of its own counts the store again (herald.stored_messages), and as many held
    -- deliveries as it has room for, oldest first, are due at once (or at their send_at) and
    -- counted there. Not one the app has fetched (herald.missed_notifications marks it delivered
    -- when the app asks past it), nor one made for an earlier registration of the device: it
    -- waits for its expiry.
    IF waiting IS NOT NULL THEN
        WITH room AS (
            SELECT dev.id AS device_id, dev.registration_started_at, cap.capacity - coalesce(store.messages, 0) AS room
            FROM herald.devices dev
            CROSS JOIN LATERAL herald.device_store(dev.token_kind) cap
            LEFT JOIN herald.stored_messages(waiting, at) store ON store.device_id = dev.id
            WHERE dev.id = ANY(waiting)
        ), released AS (
            SELECT h.id, row_number() OVER (PARTITION BY h.device_id ORDER BY h.id) AS rank, r.room
            FROM room r
            CROSS JOIN LATERAL (SELECT h.id, h.device_id FROM herald.deliveries h
                                WHERE h.device_id = r.device_id AND h.state = 'queued' AND h.sent_at IS NULL
                                  AND h.held_since IS NOT NULL AND h.fetched_at IS NULL AND h.run_at > at
                                  AND h.created_at >= r.registration_started_at
                                OFFSET 0) h
        )
        UPDATE herald.deliveries d
        SET held_since = NULL, stored_until = d.run_at, last_error = NULL,
            run_at = greatest(at, (SELECT n.send_at FROM herald.notifications n WHERE n.id = d.notification_id))
        FROM released x
        WHERE d.id = ANY(ARRAY[x.id]) AND x.rank <= x.room AND d.state = 'queued' AND d.held_since IS NOT NULL;
    END IF;


    UPDATE herald.delivery_reports r
    SET processed_at = at, outcome = 'applied'
    WHERE r.id = ANY(report_ids) AND r.processed_at IS NULL;
    GET DIAGNOSTICS applied = ROW_COUNT;
    RETURN QUERY SELECT applied, marked, woken;
END;
$$;
REVOKE ALL ON FUNCTION herald.reconcile(bigint[],timestamp with time zone,interval,interval,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.reconcile(bigint[],timestamp with time zone,interval,interval,interval) TO herald_daemon;

-- Records the receipts a provider posted for `app` (the endpoint checked their signature, which
-- covered `nonce`; NULL for a provider that signs nothing, whose receipts each carry the
-- delivery's report reference instead): each on its delivery, and what it proves on the device. A receipt counts only
-- for a delivery of that app's, sent through that provider to the token the receipt names (and,
-- once the send's answer is recorded, in that send: `message_id`); any other is refused, and
-- says nothing of whose delivery it named. Never backwards: a delivered receipt is final, and a
-- not_delivered one replaces only an older not_delivered one; the delivery's state is the
-- provider's answer to the send and stays as it is. What a recorded receipt proves: token_dead
-- soft-disables the device as a dead token does in an answer (if it still has that token and
-- registered it before the send, and no other session holds it locked); notifications_off
-- marks the device (notifications_off_at, the device feed's notifications_off), and a later
-- delivered receipt clears that.
--
-- A nonce taken before (within the ten minutes herald.receipt_nonces keeps) refuses the whole
-- post as replayed (one row, replayed). Otherwise a row a receipt: its outcome (delivered or
-- not_delivered, recorded; known, the same or an older word than the one recorded; busy, its
-- delivery held by another session; unknown_delivery, other_token, other_send) and, for one
-- matched, the seconds from the notification's commit to the provider's time.
CREATE OR REPLACE FUNCTION herald.record_receipts(
    provider text, app text, nonce text, receipts herald.provider_receipt[], at timestamptz)
RETURNS TABLE (outcome text, seconds_after_commit float8)
LANGUAGE plpgsql
SET enable_seqscan TO 'off' SET enable_hashjoin TO 'off' SET enable_mergejoin TO 'off'
SET plan_cache_mode TO 'force_generic_plan' SET jit TO 'off' SET lock_timeout TO '500ms'
AS $$
#variable_conflict use_variable
BEGIN
    -- A post a provider signs (a nonce): a few expired nonces a call, none another post is
    -- deleting, so that posts never wait on each other; then this one, taken once.
    IF nonce IS NOT NULL THEN
        DELETE FROM herald.receipt_nonces n
        WHERE n.ctid = ANY(ARRAY(SELECT o.ctid FROM herald.receipt_nonces o
                                 WHERE o.seen_at < at - interval '10 minutes' LIMIT 100 FOR UPDATE SKIP LOCKED));
        INSERT INTO herald.receipt_nonces (provider, app_id, nonce, seen_at) VALUES (provider, app, nonce, at)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'replayed'::text, NULL::float8;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    WITH given AS (
        -- A time past the post's own (by more than a signature's window) would stop later receipts
        -- from replacing this one: it is taken as the post's.
        -- A reference names the delivery and its device, or nothing when forged.
        SELECT coalesce(o.delivery_id, CASE WHEN u.reference IS NULL THEN u.delivery_id END) AS delivery_id,
               o.device_id AS referenced_device, u.token, u.message_id, u.delivered, u.meaning,
               least(to_timestamp(u.at), at + interval '5 minutes') AS said_at,
               CASE WHEN u.delivered AND u.effect = 'none' THEN 'delivered' ELSE u.effect END AS effect, u.ord
        FROM unnest(receipts) WITH ORDINALITY
             AS u(delivery_id, token, message_id, delivered, meaning, at, effect, reference, ord)
        LEFT JOIN LATERAL herald.open_reference(u.reference) o ON u.reference IS NOT NULL
    ), judged AS (
        SELECT g.*, d.id, d.device_id, coalesce(d.sent_at, d.created_at) AS sent, n.created_at AS committed_at,
               CASE WHEN d.id IS NULL OR dev.app_id IS DISTINCT FROM app
                         OR (g.referenced_device IS NOT NULL AND g.referenced_device IS DISTINCT FROM d.device_id)
                         OR NOT EXISTS (SELECT FROM herald.route_targets t JOIN herald.routes r ON r.route = t.route
                                        WHERE t.payload_kind = d.payload_kind AND t.token_kind = dev.token_kind
                                          AND r.provider = record_receipts.provider)
                         THEN 'unknown_delivery'
                    WHEN dev.push_token IS DISTINCT FROM g.token THEN 'other_token'
                    WHEN d.provider_message_id IS DISTINCT FROM g.message_id AND d.provider_message_id IS NOT NULL
                         THEN 'other_send'
                    ELSE 'matched' END AS verdict
        FROM given g
        LEFT JOIN herald.deliveries d ON d.id = ANY(ARRAY[g.delivery_id])
        LEFT JOIN herald.devices dev ON dev.id = ANY(ARRAY[d.device_id])
        LEFT JOIN herald.notifications n ON n.id = ANY(ARRAY[d.notification_id])
    ), best AS (
        -- One receipt a delivery: delivered first, then the latest.
        SELECT DISTINCT ON (j.id) j.* FROM judged j WHERE j.verdict = 'matched'
        ORDER BY j.id, j.delivered DESC, j.said_at DESC
    ), free AS (
        -- A delivery another session holds (dispatch recording it) is left: its receipt is busy,
        -- and the rest of the post is recorded.
        SELECT f.id FROM herald.deliveries f WHERE f.id = ANY(ARRAY(SELECT b.id FROM best b))
        FOR NO KEY UPDATE SKIP LOCKED
    ), recorded AS (
        UPDATE herald.deliveries AS d
        SET receipt = CASE WHEN b.delivered THEN 'delivered' ELSE 'not_delivered' END,
            receipt_reason = b.meaning, receipt_at = b.said_at
        FROM best b
        WHERE d.id = ANY(ARRAY[b.id]) AND b.id IN (SELECT f.id FROM free f)
          AND (d.receipt IS NULL
               OR (d.receipt = 'not_delivered' AND (b.delivered OR b.said_at > d.receipt_at)))
        RETURNING d.id
    ), device_effect AS (
        -- One change a device, as one statement may change a row only once: a dead token first,
        -- then the latest word.
        SELECT DISTINCT ON (b.device_id) b.*
        FROM best b
        WHERE b.id IN (SELECT r.id FROM recorded r) AND b.effect IN ('token_dead', 'notifications_off', 'delivered')
        ORDER BY b.device_id, b.effect = 'token_dead' DESC, b.said_at DESC
    ), changed AS (
        UPDATE herald.devices AS dev
        SET disabled_at = CASE WHEN e.effect = 'token_dead' THEN at ELSE dev.disabled_at END,
            disabled_cause = CASE WHEN e.effect = 'token_dead' THEN 'token_invalid' ELSE dev.disabled_cause END,
            disabled_reason = CASE WHEN e.effect = 'token_dead' THEN e.meaning ELSE dev.disabled_reason END,
            notifications_off_at = CASE e.effect WHEN 'notifications_off' THEN e.said_at WHEN 'delivered' THEN NULL
                                                 ELSE dev.notifications_off_at END,
            notifications_off_reason = CASE e.effect WHEN 'notifications_off' THEN e.meaning WHEN 'delivered' THEN NULL
                                                     ELSE dev.notifications_off_reason END
        FROM device_effect e
        WHERE dev.id = ANY(ARRAY[e.device_id]) AND dev.push_token = e.token
          AND CASE e.effect
                  WHEN 'token_dead' THEN dev.disabled_at IS NULL AND dev.registered_at <= e.sent
                  WHEN 'notifications_off' THEN dev.notifications_off_at IS NULL OR dev.notifications_off_at < e.said_at
                  ELSE dev.notifications_off_at < e.said_at END
          AND dev.id = ANY(ARRAY(SELECT free.id FROM herald.devices free WHERE free.id = e.device_id
                                 FOR NO KEY UPDATE SKIP LOCKED))
        RETURNING dev.id
    )
    -- What the device changes did is theirs to say (the device feed); they run whether or not
    -- this reads them.
    SELECT CASE WHEN j.verdict <> 'matched' THEN j.verdict
                WHEN j.ord IN (SELECT b.ord FROM best b WHERE b.id IN (SELECT r.id FROM recorded r))
                     THEN CASE WHEN j.delivered THEN 'delivered' ELSE 'not_delivered' END
                WHEN j.id NOT IN (SELECT f.id FROM free f) THEN 'busy'
                ELSE 'known' END,
           CASE WHEN j.verdict = 'matched' THEN extract(epoch FROM j.said_at - j.committed_at)::float8 END
    FROM judged j;
END;
$$;
REVOKE ALL ON FUNCTION herald.record_receipts(text,text,text,herald.provider_receipt[],timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_receipts(text,text,text,herald.provider_receipt[],timestamp with time zone) TO herald_daemon;

-- What became of a notification, step by step: for one notification (by id, or by its
-- idempotency key), or for one user's notifications since `since` (newest first, at most
-- `max_notifications`; 100 at most, of the last week at most), every step in order with its
-- time: its commit, ingest's verdict, each of the user's devices it did not go to and why
-- (disabled, and since when), and for each delivery its fan-out, its holds for the device's
-- store, each attempt's answer (the delivery's error history), its send, the provider's receipt,
-- the app's reports, its fetch, a wake-up sent to the device meanwhile, and where it ended and
-- why (or what it waits for). Tokens as logs show them. Only for an app the session acts for;
-- an operator's for any.
--   SELECT * FROM herald.notification_path('shop', notification => 4294967301);
--   SELECT * FROM herald.notification_path('shop', user_ref => 'alice', since => now() - interval '6 hours');
-- A user's notifications are found by reading the app's notifications of the generations open
-- since `since` (no index by user): keep `since` short on a busy database.
CREATE OR REPLACE FUNCTION herald.notification_path(
    app text, notification bigint DEFAULT NULL, idempotency_key text DEFAULT NULL, user_ref text DEFAULT NULL,
    since timestamptz DEFAULT now() - interval '1 day', max_notifications int DEFAULT 20)
RETURNS TABLE (notification_id bigint, device_id text, token_hint text, at timestamptz, step text, detail text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    chosen bigint[];
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.notification_path');
    IF num_nonnulls(notification, idempotency_key, user_ref) <> 1 THEN
        RAISE EXCEPTION 'herald.notification_path: give one of notification, idempotency_key and user_ref'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Bounded: a user's of the last week at most, and at most 100 of them.
    since := greatest(since, now() - interval '7 days');
    max_notifications := least(greatest(max_notifications, 1), 100);
    chosen := ARRAY(
        SELECT n.id FROM herald.notifications n
        WHERE n.app_id = app
          AND (notification IS NULL OR n.id = notification)
          AND (idempotency_key IS NULL OR (n.idempotency_key = idempotency_key AND n.idempotency_key IS NOT NULL))
          AND (user_ref IS NULL OR (n.user_ref = user_ref AND n.created_at >= since
               AND n.id >= coalesce((SELECT min(g.first_id) FROM herald.generations g
                                     WHERE g.closed_at IS NULL OR g.closed_at >= since), 0)))
        ORDER BY n.id DESC LIMIT max_notifications);
    RETURN QUERY
    WITH n AS (
        SELECT * FROM herald.notifications n WHERE n.id = ANY(chosen)
    ), d AS (
        SELECT d.*, dev.device_id AS device, herald.token_hint(coalesce(pt.token, act.token, dev.push_token)) AS hint
        FROM herald.deliveries d
        LEFT JOIN herald.devices dev ON dev.id = d.device_id
        LEFT JOIN herald.push_type_tokens pt ON pt.id = d.push_type_token_id
        LEFT JOIN herald.activity_tokens act ON act.id = d.activity_token_id
        WHERE d.notification_id = ANY(chosen)
    ), steps AS (
        SELECT n.id, NULL::text AS device, NULL::text AS hint, n.created_at AS happened, 'committed' AS what,
               coalesce('to user ' || n.user_ref, 'to devices ' || array_to_string(n.device_ids, ', '),
                        'to topic ' || n.topic, 'to activity ' || n.activity_id, 'to its channel')
               || CASE WHEN n.send_at IS NULL THEN '' ELSE ', to send at ' || n.send_at END AS words, 0 AS rank
        FROM n
        UNION ALL
        SELECT n.id, NULL, NULL, coalesce(n.ingested_at, now()),
               CASE n.state WHEN 'received' THEN 'waiting for ingest' ELSE n.state END,
               coalesce(n.reason, CASE n.state WHEN 'accepted' THEN (SELECT count(*) FROM d WHERE d.notification_id = n.id)
                                                                    || ' deliveries' END), 1
        FROM n
        UNION ALL
        -- The user's devices it did not go to: disabled before ingest.
        SELECT n.id, v.device_id, herald.token_hint(v.push_token), v.disabled_at, 'not sent to',
               format('disabled since %s: %s (%s)', v.disabled_at, v.disabled_cause, v.disabled_reason), 2
        FROM n JOIN herald.devices v ON v.app_id = n.app_id AND v.user_ref = n.user_ref
        WHERE v.disabled_at <= coalesce(n.ingested_at, now())
          AND NOT EXISTS (SELECT FROM d WHERE d.notification_id = n.id AND d.device_id = v.id)
        UNION ALL
        SELECT d.notification_id, d.device, d.hint, d.created_at, 'fanned out', d.payload_kind, 3 FROM d
        UNION ALL
        -- Held at birth by ingest, whose time is taken just before the delivery's row is made.
        SELECT d.notification_id, d.device, d.hint, greatest(d.held_since, d.created_at), 'held for the device''s store',
               CASE WHEN d.stored_until IS NULL THEN NULL ELSE 'counted in its store until ' || d.stored_until END, 4
        FROM d WHERE d.held_since IS NOT NULL
        UNION ALL
        SELECT d.notification_id, d.device, d.hint,
               -- Kept to the second: not before the delivery was made, in that second.
               CASE WHEN e.entry ~ '^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d '
                    THEN greatest(left(e.entry, 19)::timestamp AT TIME ZONE 'UTC', d.created_at) END,
               'answered', regexp_replace(e.entry, '^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ', ''), 5
        FROM d CROSS JOIN LATERAL unnest(d.error_history) AS e(entry)
        UNION ALL
        SELECT d.notification_id, d.device, d.hint, d.sent_at, CASE d.state WHEN 'validated' THEN 'validated' ELSE 'sent' END,
               CASE WHEN d.provider_message_id IS NULL THEN NULL ELSE 'the provider''s id: ' || d.provider_message_id END, 6
        FROM d WHERE d.sent_at IS NOT NULL
        UNION ALL
        SELECT d.notification_id, d.device, d.hint, d.receipt_at, 'receipt: ' || d.receipt, d.receipt_reason, 7
        FROM d WHERE d.receipt IS NOT NULL
        UNION ALL
        SELECT d.notification_id, d.device, d.hint, r.happened, r.what, NULL, 8
        FROM d CROSS JOIN LATERAL (VALUES (d.delivered_at, 'the app reported it delivered'),
                                          (d.seen_at, 'the app reported it seen'),
                                          (d.opened_at, 'the app reported it opened'),
                                          (d.fetched_at, 'the app fetched it')) AS r(happened, what)
        WHERE r.happened IS NOT NULL
        UNION ALL
        SELECT d.notification_id, d.device, d.hint, greatest(w.created_at, d.created_at), 'the device was woken',
               format('a silent wake-up to fetch %s missed', w.missed), 9
        -- From its send (or hold) until the app had it; a sent delivery's finished_at is its send.
        FROM d JOIN herald.wakeups w
          ON w.device_id = d.device_id
         AND w.created_at >= coalesce(d.sent_at, d.held_since)
         AND w.created_at <= coalesce(d.delivered_at, d.fetched_at,
                                      CASE WHEN d.state NOT IN ('queued', 'sent') THEN d.finished_at END, 'infinity')
        WHERE coalesce(d.sent_at, d.held_since) IS NOT NULL AND d.payload_kind NOT IN ('ios_wakeup', 'android_wakeup')
        UNION ALL
        SELECT d.notification_id, d.device, d.hint,
               CASE WHEN d.state = 'queued' THEN d.run_at ELSE coalesce(d.finished_at, d.sent_at) END,
               CASE WHEN d.state = 'queued' THEN CASE WHEN d.attempts > 0 AND d.locked_by IS NOT NULL THEN 'being sent'
                                                      ELSE 'waiting' END
                    ELSE 'ended ' || d.state END,
               d.last_error, 10
        FROM d WHERE d.state NOT IN ('sent', 'validated')
    )
    SELECT s.id, s.device, s.hint, s.happened, s.what, s.words FROM steps s
    ORDER BY s.id DESC, s.device NULLS FIRST, s.happened NULLS LAST, s.rank;
END;
$$;
REVOKE ALL ON FUNCTION herald.notification_path(text,bigint,text,text,timestamp with time zone,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.notification_path(text,bigint,text,text,timestamp with time zone,integer) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.notification_path(text,bigint,text,text,timestamp with time zone,integer) TO herald_operator;

-- Herald's count of what it sent through FCM to app's Android devices each day from `first_day`
-- to `last_day` (Google's days, America/Los_Angeles), dry runs left out, and of what it held back
-- each day because the device's store at FCM was full: one read of the deliveries of the
-- generations open since the first day (no index by day), once a day per app, by
-- herald.record_fcm_delivery_days.
CREATE OR REPLACE FUNCTION herald.fcm_sent_by_day(app text, first_day date, last_day date)
RETURNS TABLE (day date, sent bigint, held bigint)
LANGUAGE sql STABLE AS $$
    SELECT e.day, count(*) FILTER (WHERE e.sent), count(*) FILTER (WHERE NOT e.sent)
    FROM herald.deliveries d
    JOIN herald.devices v ON v.id = d.device_id AND v.app_id = app AND v.platform = 'android'
    CROSS JOIN LATERAL (VALUES ((d.sent_at AT TIME ZONE 'America/Los_Angeles')::date, d.state <> 'validated'),
                               ((d.held_since AT TIME ZONE 'America/Los_Angeles')::date, false)) AS e(day, sent)
    WHERE d.id >= coalesce((SELECT min(g.first_id) FROM herald.generations g
                            WHERE g.closed_at IS NULL
                               OR g.closed_at >= first_day::timestamp AT TIME ZONE 'America/Los_Angeles'), 0)
      AND (d.sent_at >= first_day::timestamp AT TIME ZONE 'America/Los_Angeles'
           OR d.held_since >= first_day::timestamp AT TIME ZONE 'America/Los_Angeles')
      AND e.day BETWEEN first_day AND last_day
      AND (e.sent OR d.held_since IS NOT NULL)
      AND EXISTS (SELECT FROM herald.route_targets t JOIN herald.routes r ON r.route = t.route
                  WHERE t.payload_kind = d.payload_kind AND t.token_kind = v.token_kind AND r.provider = 'fcm')
    GROUP BY e.day;
$$;
REVOKE ALL ON FUNCTION herald.fcm_sent_by_day(text,date,date) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.fcm_sent_by_day(text,date,date) TO herald_daemon;

-- Claims the apps whose FCM delivery data is due at `at` (each app with an android_app_id gets a
-- row of herald.fcm_delivery_reads, due at once), for `lease`: another daemon takes one only
-- once that passed. Skips a row another session holds.
CREATE OR REPLACE FUNCTION herald.claim_fcm_delivery_reads(at timestamptz, lease interval)
RETURNS TABLE (app_id text, project_id text, credentials_file text, android_app_id text)
LANGUAGE plpgsql SET lock_timeout TO '500ms' AS $$
#variable_conflict use_column
BEGIN
    INSERT INTO herald.fcm_delivery_reads (app_id, next_read_at)
    SELECT f.app_id, claim_fcm_delivery_reads.at FROM herald.app_fcm f WHERE f.android_app_id IS NOT NULL
    ON CONFLICT DO NOTHING;
    RETURN QUERY
    UPDATE herald.fcm_delivery_reads r SET next_read_at = claim_fcm_delivery_reads.at + lease
    FROM herald.app_fcm f
    WHERE f.app_id = r.app_id AND f.android_app_id IS NOT NULL
      AND r.app_id IN (SELECT x.app_id FROM herald.fcm_delivery_reads x
                       WHERE x.next_read_at <= claim_fcm_delivery_reads.at FOR UPDATE SKIP LOCKED)
    RETURNING r.app_id, f.project_id, f.credentials_file, f.android_app_id;
END;
$$;
REVOKE ALL ON FUNCTION herald.claim_fcm_delivery_reads(timestamp with time zone,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.claim_fcm_delivery_reads(timestamp with time zone,interval) TO herald_daemon;

-- Keeps what a read of `app`'s FCM delivery data found at `at`: each day and label as Google
-- gives it (a day read again takes Google's newer figures; a day given twice, its first), the
-- day's own count of Herald's on the row of the empty label (NULL for a day before Herald's
-- oldest generation), the days older than `keep` left out; the next read a day later. A read that failed (`problem`) keeps its
-- problem and is tried again in an hour.
CREATE OR REPLACE FUNCTION herald.record_fcm_delivery_days(
    app text, days herald.fcm_delivery_day[], at timestamptz, problem text, keep interval)
RETURNS void
LANGUAGE plpgsql SET lock_timeout TO '500ms' AS $$
#variable_conflict use_variable
DECLARE
    kept_since timestamptz;
BEGIN
    IF problem IS NULL THEN
        -- The days within the retention (`keep`): retention deleted the older ones' rows. Herald
        -- counts only the days whose deliveries it still has (since its oldest generation opened);
        -- a day's count is taken again while it may still change (the last two days), and an
        -- older one keeps the count it has.
        kept_since := coalesce((SELECT min(g.opened_at) FROM herald.generations g WHERE g.opened_at > '-infinity'), at);
        WITH given AS (
            SELECT DISTINCT ON (u.day, coalesce(u.analytics_label, '')) u.day, coalesce(u.analytics_label, '') AS label,
                   u.accepted, u.data
            FROM unnest(days) AS u
            WHERE u.day >= ((at - keep) AT TIME ZONE 'America/Los_Angeles')::date
        ), counted AS (
            SELECT * FROM herald.fcm_sent_by_day(
                app, greatest((SELECT min(g.day) FROM given g), (kept_since AT TIME ZONE 'America/Los_Angeles')::date),
                (SELECT max(g.day) FROM given g))
        )
        INSERT INTO herald.fcm_delivery_days AS k (
            app_id, day, analytics_label, accepted, delivered, pending, collapsed, dropped_too_many_pending,
            dropped_app_force_stopped, dropped_device_inactive, dropped_ttl_expired, data, herald_sent, herald_held,
            read_at)
        SELECT app, g.day, g.label, g.accepted,
               (g.data #>> '{messageOutcomePercents,delivered}')::real,
               (g.data #>> '{messageOutcomePercents,pending}')::real,
               (g.data #>> '{messageOutcomePercents,collapsed}')::real,
               (g.data #>> '{messageOutcomePercents,droppedTooManyPendingMessages}')::real,
               (g.data #>> '{messageOutcomePercents,droppedAppForceStopped}')::real,
               (g.data #>> '{messageOutcomePercents,droppedDeviceInactive}')::real,
               (g.data #>> '{messageOutcomePercents,droppedTtlExpired}')::real,
               g.data,
               CASE WHEN g.label = '' AND g.day >= (kept_since AT TIME ZONE 'America/Los_Angeles')::date
                    THEN coalesce(c.sent, 0) END,
               CASE WHEN g.label = '' AND g.day >= (kept_since AT TIME ZONE 'America/Los_Angeles')::date
                    THEN coalesce(c.held, 0) END,
               at
        FROM given g LEFT JOIN counted c ON c.day = g.day
        ON CONFLICT (app_id, day, analytics_label) DO UPDATE
        SET accepted = excluded.accepted, delivered = excluded.delivered, pending = excluded.pending,
            collapsed = excluded.collapsed, dropped_too_many_pending = excluded.dropped_too_many_pending,
            dropped_app_force_stopped = excluded.dropped_app_force_stopped,
            dropped_device_inactive = excluded.dropped_device_inactive,
            dropped_ttl_expired = excluded.dropped_ttl_expired, data = excluded.data,
            herald_sent = CASE WHEN k.herald_sent IS NULL
                                    OR k.day >= (at AT TIME ZONE 'America/Los_Angeles')::date - 2
                               THEN excluded.herald_sent ELSE k.herald_sent END,
            herald_held = CASE WHEN k.herald_held IS NULL
                                    OR k.day >= (at AT TIME ZONE 'America/Los_Angeles')::date - 2
                               THEN excluded.herald_held ELSE k.herald_held END,
            read_at = excluded.read_at;
    END IF;
    UPDATE herald.fcm_delivery_reads r
    SET read_at = CASE WHEN problem IS NULL THEN at ELSE r.read_at END,
        problem = record_fcm_delivery_days.problem,
        next_read_at = at + CASE WHEN problem IS NULL THEN interval '1 day' ELSE interval '1 hour' END
    WHERE r.app_id = app;
END;
$$;
REVOKE ALL ON FUNCTION herald.record_fcm_delivery_days(text,herald.fcm_delivery_day[],timestamp with time zone,text,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_fcm_delivery_days(text,herald.fcm_delivery_day[],timestamp with time zone,text,interval) TO herald_daemon;
