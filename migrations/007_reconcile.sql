-- 007: delivery reports, silent wake-ups for offline iOS devices, and the pending fetch.
--
-- Every device payload carries an opaque reference (herald_report): the delivery and device
-- ids with an HMAC-SHA256 tag under herald.secrets' report_hmac. The app sends it back to
-- report the delivery, and uses it to fetch what it missed. The dispatch worker makes
-- references in Swift; the functions below check and make the same ones in SQL.

-- HMAC-SHA256 (RFC 2104) over PostgreSQL's built-in sha256, so no extension is needed.
CREATE FUNCTION herald.hmac_sha256(key bytea, message bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH sized AS (SELECT CASE WHEN octet_length(key) > 64 THEN sha256(key) ELSE key END AS k),
         padded AS (SELECT k || decode(repeat('00', 64 - octet_length(k)), 'hex') AS k FROM sized),
         pads AS (
             SELECT decode(string_agg(lpad(to_hex(get_byte(k, i) # 54), 2, '0'), '' ORDER BY i), 'hex') AS inner_key,
                    decode(string_agg(lpad(to_hex(get_byte(k, i) # 92), 2, '0'), '' ORDER BY i), 'hex') AS outer_key
             FROM padded, generate_series(0, 63) AS i)
    SELECT sha256(outer_key || sha256(inner_key || message)) FROM pads;
$$;

-- The reference for one delivery to one device: base64url(delivery, device, first 16 bytes of the tag).
CREATE FUNCTION herald.delivery_reference(delivery_id bigint, device_id bigint) RETURNS text
LANGUAGE sql STABLE STRICT AS $$
    SELECT rtrim(translate(encode(body || substring(herald.hmac_sha256(s.value, body) FROM 1 FOR 16), 'base64'),
                           '+/', '-_'), '=')
    FROM (SELECT int8send(delivery_id) || int8send(device_id) AS body) AS b,
         herald.secrets s
    WHERE s.name = 'report_hmac';
$$;

-- The delivery and device a reference names; both NULL when it is malformed or forged.
CREATE FUNCTION herald.open_reference(reference text, OUT delivery_id bigint, OUT device_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    raw bytea;
    secret bytea := (SELECT value FROM herald.secrets WHERE name = 'report_hmac');
BEGIN
    IF reference IS NULL OR reference !~ '^[A-Za-z0-9_-]{43}$' THEN
        RETURN;
    END IF;
    raw := decode(translate(reference, '-_', '+/') || '=', 'base64');
    IF substring(raw FROM 17) <> substring(herald.hmac_sha256(secret, substring(raw FROM 1 FOR 16)) FROM 1 FOR 16) THEN
        RETURN;
    END IF;
    delivery_id := ('x' || encode(substring(raw FROM 1 FOR 8), 'hex'))::bit(64)::bigint;
    device_id := ('x' || encode(substring(raw FROM 9 FOR 8), 'hex'))::bit(64)::bigint;
END;
$$;

-- A wake-up is a delivery of its own payload kind: content-available only, priority 5.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic'));
ALTER TABLE herald.deliveries ADD COLUMN opened_at timestamptz;
-- At most one wake-up waiting to be sent per device, whatever the daemons do.
CREATE UNIQUE INDEX deliveries_one_pending_wakeup ON herald.deliveries (device_id)
    WHERE payload_kind = 'ios_wakeup' AND state = 'queued';
-- The pending fetch: a device's sent, unreported deliveries, newest first.
CREATE INDEX deliveries_unreported ON herald.deliveries (device_id, sent_at DESC) WHERE state = 'sent';

-- Notifications Herald makes itself (wake-ups) are marked, so operators can tell them apart.
ALTER TABLE herald.notifications ADD COLUMN origin text NOT NULL DEFAULT 'producer'
    CHECK (origin IN ('producer', 'wakeup'));

-- Only notifications that still need ingesting get an ingest job.
CREATE OR REPLACE FUNCTION herald.enqueue_ingest() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO herald.jobs (kind, ref) SELECT 'ingest', id FROM new_notifications WHERE state = 'received';
    RETURN NULL;
END;
$$;

-- Reports, resolved when they arrive: one per delivery and kind, so a replay is refused.
ALTER TABLE herald.delivery_reports
    ADD COLUMN delivery_id bigint NOT NULL REFERENCES herald.deliveries ON DELETE CASCADE,
    ADD COLUMN device_id bigint NOT NULL,
    ADD CONSTRAINT delivery_reports_once UNIQUE (delivery_id, report_kind);

-- One wake-up per device per quiet period (30 minutes by default), enforced here: two
-- daemons reconciling at once cannot both insert one. quiet_until is stored per row, so the
-- period can change without a migration.
CREATE TABLE herald.wakeups (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id        bigint NOT NULL REFERENCES herald.devices ON DELETE CASCADE,
    -- The report that revealed the gap, and how many sent deliveries it found unreported.
    report_id        bigint,
    missed           int NOT NULL,
    notification_id  bigint REFERENCES herald.notifications ON DELETE CASCADE,
    created_at       timestamptz NOT NULL,
    quiet_until      timestamptz NOT NULL CHECK (quiet_until > created_at),
    CONSTRAINT "one wake-up per device per quiet period"
        EXCLUDE USING gist (int8range(device_id, device_id, '[]') WITH &&,
                            tstzrange(created_at, quiet_until) WITH &&)
);

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
CREATE FUNCTION herald.report_delivery(reference text, kind text DEFAULT 'delivered', device text DEFAULT NULL,
                                       OUT accepted boolean, OUT outcome text, OUT message text)
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
    IF device IS NOT NULL AND owner.device_id IS DISTINCT FROM device THEN
        outcome := 'wrong_device';
        message := format('the reference belongs to another device than %s', quote_literal(device));
        RETURN;
    END IF;
    INSERT INTO herald.delivery_reports (reference, report_kind, delivery_id, device_id)
    SELECT reference, kind, d.id, d.device_id
    FROM herald.deliveries d
    WHERE d.id = opened.delivery_id AND d.device_id = opened.device_id
    ON CONFLICT (delivery_id, report_kind) DO NOTHING
    RETURNING id INTO report_id;
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

-- Each new report gets a reconcile job, in the reporting transaction.
CREATE FUNCTION herald.enqueue_reconcile() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO herald.jobs (kind, ref) SELECT 'reconcile', id FROM new_reports;
    RETURN NULL;
END;
$$;
CREATE TRIGGER delivery_reports_enqueue_reconcile
    AFTER INSERT ON herald.delivery_reports
    REFERENCING NEW TABLE AS new_reports
    FOR EACH STATEMENT EXECUTE FUNCTION herald.enqueue_reconcile();

-- Applies a batch of reports (the reconcile worker calls it; running it twice changes nothing):
--
-- 1. Each reported delivery becomes 'delivered' (first report wins); 'seen' and 'opened'
--    record their time too, and imply delivered.
-- 2. An iOS device whose report reveals earlier deliveries that were sent but never reported
--    was offline, and APNs kept only the newest: it gets one wake-up, a background push that
--    makes the app fetch what it missed. Deliveries sent within `grace` of `at` do not count
--    (their reports may still be on their way), nor those older than `fetch_window`. The
--    exclusion constraint on herald.wakeups and the unique index on pending wake-up
--    deliveries keep it to one per device per `quiet` period, across all daemons.
CREATE FUNCTION herald.reconcile(report_ids bigint[], at timestamptz DEFAULT now(),
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
    new_delivery bigint;
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
        finished_at = coalesce(d.finished_at, at)
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
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind)
        VALUES (new_notification, candidate.device, 'ios_wakeup')
        RETURNING id INTO new_delivery;
        INSERT INTO herald.jobs (kind, ref, run_at) VALUES ('dispatch', new_delivery, at);
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
REVOKE ALL ON FUNCTION herald.reconcile(bigint[], timestamptz, interval, interval, interval) FROM PUBLIC;

-- What a woken app missed: the notifications sent to the reference's device and never
-- reported, newest first, each with its own reference so the app can report it once shown.
-- Any reference the device received (the wake-up's own, for one) identifies it, so a device
-- reads only its own notifications.
--   SELECT * FROM herald.pending_notifications('q1w2…');
CREATE FUNCTION herald.pending_notifications(reference text, since timestamptz DEFAULT now() - interval '3 days',
                                             max_count int DEFAULT 20, device text DEFAULT NULL)
RETURNS TABLE (notification_id bigint, report_reference text, title text, body text, data jsonb,
               image_url text, deep_link text, sent_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    opened record;
BEGIN
    opened := herald.open_reference(reference);
    IF opened.device_id IS NULL THEN
        RAISE EXCEPTION 'herald.pending_notifications: the reference was not issued by this Herald'
            USING ERRCODE = 'invalid_authorization_specification',
                  HINT = 'pass herald_report from a payload this device received, unchanged';
    END IF;
    IF device IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.devices dev
                                          WHERE dev.id = opened.device_id AND dev.device_id = device) THEN
        RAISE EXCEPTION 'herald.pending_notifications: the reference belongs to another device than %',
            quote_literal(device) USING ERRCODE = 'invalid_authorization_specification';
    END IF;
    IF max_count IS NULL OR max_count < 1 OR max_count > 100 THEN
        RAISE EXCEPTION 'herald.pending_notifications: max_count must be from 1 to 100, not %', max_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT n.id, herald.delivery_reference(d.id, d.device_id), n.title, n.body, n.data, n.image_url, n.deep_link,
           d.sent_at
    FROM herald.deliveries d
    JOIN herald.notifications n ON n.id = d.notification_id
    WHERE d.device_id = opened.device_id AND d.state = 'sent'
      AND d.payload_kind IN ('ios_alert', 'android_data') AND NOT n.silent
      AND d.sent_at >= coalesce(since, '-infinity')
    ORDER BY d.sent_at DESC, d.id DESC
    LIMIT max_count;
END;
$$;

-- Herald's own helpers stay private; the producer reports and fetches through the functions above.
REVOKE ALL ON FUNCTION herald.hmac_sha256(bytea, bytea), herald.delivery_reference(bigint, bigint),
                       herald.open_reference(text), herald.enqueue_reconcile() FROM PUBLIC;
REVOKE ALL ON FUNCTION herald.report_delivery(text, text, text),
                       herald.pending_notifications(text, timestamptz, int, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.report_delivery(text, text, text),
                          herald.pending_notifications(text, timestamptz, int, text) TO herald_producer;

-- For operators: wake-ups, with the device and what they were for.
--   SELECT * FROM herald.recent_wakeups WHERE app_id = 'shop' ORDER BY created_at DESC LIMIT 20;
CREATE VIEW herald.recent_wakeups AS
SELECT w.id, dev.app_id, dev.device_id, w.missed, w.created_at, w.quiet_until, w.notification_id,
       d.state AS delivery_state, d.sent_at, d.last_error
FROM herald.wakeups w
JOIN herald.devices dev ON dev.id = w.device_id
LEFT JOIN herald.deliveries d ON d.notification_id = w.notification_id;
GRANT SELECT ON herald.recent_wakeups TO herald_operator;
