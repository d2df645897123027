-- 002: the producer's SQL contract and the ingest step.
--
-- Producers register devices and send notifications with one statement each, inside their
-- own transactions; nothing reaches a phone unless that transaction commits. Ingest turns
-- each new notification into one delivery per enabled device, in batches.

-- Register a device, or refresh its token. Returns the device's row id and what happened:
--   'registered'     new, or updated while enabled;
--   're-enabled'     it had been disabled (logout, dead or moved token) and is enabled again;
--   'token_invalid'  the same token that FCM declared dead: the device stays disabled.
-- A token held by another device of the same app moves here; that device is disabled.
CREATE FUNCTION herald.register_device(
    app text, device text, platform text, push_token text, user_ref text DEFAULT NULL,
    OUT device_row_id bigint, OUT status text)
LANGUAGE plpgsql AS $$
DECLARE
    existing herald.devices;
BEGIN
    IF platform NOT IN ('android', 'ios') THEN
        RAISE EXCEPTION 'herald.register_device: platform must be ''android'' or ''ios'', not %', quote_literal(platform)
            USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(push_token, '') = '' THEN
        RAISE EXCEPTION 'herald.register_device: push_token is empty' USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM herald.apps a WHERE a.app_id = app) THEN
        RAISE EXCEPTION 'herald.register_device: unknown app %; add it to herald.apps first', quote_literal(app)
            USING ERRCODE = 'foreign_key_violation';
    END IF;

    -- Tokens are unique per app: take it from any other device that holds it.
    UPDATE herald.devices d
    SET push_token = NULL, disabled_at = now(), disabled_cause = 'token_moved',
        disabled_reason = format('its push token was registered again by device %s', device)
    WHERE d.app_id = app AND d.push_token = register_device.push_token AND d.device_id <> device;

    INSERT INTO herald.devices AS d (app_id, device_id, platform, push_token, user_ref)
    VALUES (app, device, platform, register_device.push_token, register_device.user_ref)
    ON CONFLICT (app_id, device_id) DO NOTHING
    RETURNING d.id INTO device_row_id;
    IF FOUND THEN
        status := 'registered';
        RETURN;
    END IF;

    SELECT * INTO existing FROM herald.devices d WHERE d.app_id = app AND d.device_id = device FOR UPDATE;
    device_row_id := existing.id;
    IF existing.disabled_cause = 'token_invalid' AND existing.push_token = register_device.push_token THEN
        -- FCM said this token is dead; registering it again does not make it live.
        UPDATE herald.devices d SET platform = register_device.platform, user_ref = register_device.user_ref,
            registered_at = now()
        WHERE d.id = existing.id;
        status := 'token_invalid';
        RETURN;
    END IF;
    UPDATE herald.devices d
    SET platform = register_device.platform, push_token = register_device.push_token,
        user_ref = register_device.user_ref, registered_at = now(),
        disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    WHERE d.id = existing.id;
    status := CASE WHEN existing.disabled_at IS NULL THEN 'registered' ELSE 're-enabled' END;
END;
$$;

-- Log a device out: it is disabled, with the reason, until it registers again.
-- Returns false when the device is unknown.
CREATE FUNCTION herald.unregister_device(app text, device text, reason text DEFAULT 'logged out')
RETURNS boolean
LANGUAGE sql AS $$
    UPDATE herald.devices
    SET disabled_at = coalesce(disabled_at, now()), disabled_cause = 'logout', disabled_reason = reason
    WHERE app_id = app AND device_id = device
    RETURNING true;
$$;

-- Send a notification. Returns its id; with an idempotency key already used by this app,
-- returns the first notification's id and sends nothing more.
CREATE FUNCTION herald.send(
    app text,
    user_ref text DEFAULT NULL, device_ids text[] DEFAULT NULL, topic text DEFAULT NULL,
    title text DEFAULT NULL, body text DEFAULT NULL, data jsonb DEFAULT NULL, image_url text DEFAULT NULL,
    sound text DEFAULT NULL, badge int DEFAULT NULL, android_channel_id text DEFAULT NULL,
    ios_category text DEFAULT NULL, ios_thread_id text DEFAULT NULL, deep_link text DEFAULT NULL,
    idempotency_key text DEFAULT NULL, priority text DEFAULT NULL, ttl interval DEFAULT NULL,
    expires_at timestamptz DEFAULT NULL, collapse_key text DEFAULT NULL, send_at timestamptz DEFAULT NULL,
    silent boolean DEFAULT false, dry_run boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    notification_id bigint;
BEGIN
    INSERT INTO herald.notifications AS n (
        app_id, idempotency_key, user_ref, device_ids, topic, title, body, data, image_url, sound, badge,
        android_channel_id, ios_category, ios_thread_id, deep_link, priority, ttl, expires_at, collapse_key,
        send_at, silent, dry_run)
    VALUES (
        app, send.idempotency_key, send.user_ref, send.device_ids, send.topic, send.title, send.body, send.data,
        send.image_url, send.sound, send.badge, send.android_channel_id, send.ios_category, send.ios_thread_id,
        send.deep_link, send.priority, send.ttl, send.expires_at, send.collapse_key, send.send_at,
        coalesce(send.silent, false), coalesce(send.dry_run, false))
    ON CONFLICT (app_id, idempotency_key) DO NOTHING
    RETURNING n.id INTO notification_id;
    IF notification_id IS NULL THEN
        SELECT n.id INTO notification_id FROM herald.notifications n
        WHERE n.app_id = app AND n.idempotency_key = send.idempotency_key;
    END IF;
    RETURN notification_id;
END;
$$;

-- Every new notification gets an ingest job, in the producer's transaction. One statement
-- per inserting statement; the jobs trigger then sends at most one NOTIFY per transaction.
CREATE FUNCTION herald.enqueue_ingest() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO herald.jobs (kind, ref) SELECT 'ingest', id FROM new_notifications;
    RETURN NULL;
END;
$$;

CREATE TRIGGER notifications_enqueue_ingest
    AFTER INSERT ON herald.notifications
    REFERENCING NEW TABLE AS new_notifications
    FOR EACH STATEMENT EXECUTE FUNCTION herald.enqueue_ingest();

-- FCM refuses these data keys.
CREATE FUNCTION herald.is_reserved_data_key(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT lower(key) IN ('from', 'message_type') OR lower(key) LIKE 'google.%' OR lower(key) LIKE 'gcm.%';
$$;

-- Numbers and booleans become strings (FCM takes only strings); other values are left for
-- notification_problem to name.
CREATE FUNCTION herald.stringify_data(data jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(data) = 'object' THEN
        coalesce((SELECT jsonb_object_agg(key,
                      CASE WHEN jsonb_typeof(value) IN ('number', 'boolean') THEN to_jsonb(value #>> '{}') ELSE value END)
                  FROM jsonb_each(data)), '{}'::jsonb)
    ELSE data END;
$$;

-- An estimate of the bytes FCM counts for a notification: the Android data map, which
-- carries the content plus Herald's own keys (id, delivery reference) and is the larger of
-- the two platforms' payloads.
CREATE FUNCTION herald.payload_bytes(n herald.notifications) RETURNS int
LANGUAGE sql STABLE AS $$
    SELECT octet_length(
        (coalesce(herald.stringify_data(n.data), '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
            'title', n.title, 'body', n.body, 'image_url', n.image_url, 'deep_link', n.deep_link,
            'sound', n.sound, 'channel_id', n.android_channel_id)))::text)
        + 160;  -- herald_notification_id, herald_report and their quoting
$$;

-- What is wrong with a notification, in words for the producer; NULL when nothing is.
CREATE FUNCTION herald.notification_problem(n herald.notifications, app herald.apps) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    entry record;
    size int;
    limit_bytes int := CASE WHEN n.topic IS NULL THEN 4096 ELSE 2048 END;
BEGIN
    IF app.app_id IS NULL THEN
        RETURN format('unknown app %s: add it to herald.apps, or fix app_id', quote_literal(n.app_id));
    END IF;
    IF NOT n.silent AND coalesce(n.title, '') = '' AND coalesce(n.body, '') = ''
       AND (n.data IS NULL OR n.data = '{}'::jsonb) THEN
        RETURN 'nothing to send: give a title, a body or data (or set silent for a bare wake-up)';
    END IF;
    IF n.data IS NOT NULL AND jsonb_typeof(n.data) <> 'object' THEN
        RETURN format('data must be a JSON object of strings, not a JSON %s', jsonb_typeof(n.data));
    END IF;
    FOR entry IN SELECT key, value FROM jsonb_each(coalesce(n.data, '{}'::jsonb)) LOOP
        IF jsonb_typeof(entry.value) NOT IN ('string', 'number', 'boolean') THEN
            RETURN format('data value for key %s is a JSON %s; data values must be strings (numbers and booleans are converted)',
                          quote_literal(entry.key), jsonb_typeof(entry.value));
        END IF;
        IF herald.is_reserved_data_key(entry.key) THEN
            RETURN format('data key %s is reserved by FCM (from, message_type, google.*, gcm.*); rename it',
                          quote_literal(entry.key));
        END IF;
    END LOOP;
    IF n.image_url IS NOT NULL AND n.image_url NOT LIKE 'https://%' THEN
        RETURN format('image_url must be an https:// URL, not %s', quote_literal(left(n.image_url, 80)));
    END IF;
    IF n.device_ids IS NOT NULL AND cardinality(n.device_ids) = 0 THEN
        RETURN 'device_ids is empty: name at least one device';
    END IF;
    size := herald.payload_bytes(n);
    IF size > limit_bytes THEN
        RETURN format('payload is about %s bytes once encoded, %s over FCM''s %s-byte limit; shorten the title, body or data',
                      size, size - limit_bytes, limit_bytes);
    END IF;
    RETURN NULL;
END;
$$;

-- Ingests a batch of notifications in one call: rejects bad ones with their reason, fills in
-- the app's defaults, expires what is already past its expiry, creates one delivery per
-- enabled device (or one for a topic) and enqueues their dispatch at send_at or now.
-- Only notifications still 'received' are touched, so running it twice changes nothing.
CREATE FUNCTION herald.ingest(ids bigint[], at timestamptz DEFAULT now())
RETURNS TABLE (accepted int, rejected int, expired int, no_devices int, deliveries int)
LANGUAGE plpgsql AS $$
DECLARE
    created int;
BEGIN
    -- Lock the batch in id order, so concurrent ingesters cannot deadlock.
    PERFORM 1 FROM herald.notifications n WHERE n.id = ANY(ids) AND n.state = 'received' ORDER BY n.id FOR UPDATE;

    UPDATE herald.notifications n
    SET state = 'rejected', reason = p.problem, ingested_at = at
    FROM (SELECT n2.id, herald.notification_problem(n2, a) AS problem
          FROM herald.notifications n2 LEFT JOIN herald.apps a ON a.app_id = n2.app_id
          WHERE n2.id = ANY(ids) AND n2.state = 'received') AS p
    WHERE n.id = p.id AND p.problem IS NOT NULL;

    -- The app's defaults; a ttl becomes the absolute expires_at it implies.
    UPDATE herald.notifications n
    SET priority = coalesce(n.priority, a.default_priority),
        expires_at = coalesce(n.expires_at, n.created_at + coalesce(n.ttl, a.default_ttl)),
        ttl = NULL,
        data = herald.stringify_data(n.data)
    FROM herald.apps a
    WHERE a.app_id = n.app_id AND n.id = ANY(ids) AND n.state = 'received';

    UPDATE herald.notifications n
    SET state = 'expired', reason = format('expired at %s, before it could be sent', n.expires_at), ingested_at = at
    WHERE n.id = ANY(ids) AND n.state = 'received' AND n.expires_at <= greatest(at, coalesce(n.send_at, at));

    WITH targets AS (
        SELECT n.id AS notification_id, d.id AS device_id, d.platform, n.silent, n.send_at
        FROM herald.notifications n
        JOIN herald.devices d ON d.app_id = n.app_id AND d.user_ref = n.user_ref AND d.disabled_at IS NULL
        WHERE n.id = ANY(ids) AND n.state = 'received' AND n.user_ref IS NOT NULL
        UNION ALL
        SELECT n.id, d.id, d.platform, n.silent, n.send_at
        FROM herald.notifications n
        CROSS JOIN LATERAL (SELECT DISTINCT unnest(n.device_ids) AS device_id) AS wanted
        JOIN herald.devices d ON d.app_id = n.app_id AND d.device_id = wanted.device_id AND d.disabled_at IS NULL
        WHERE n.id = ANY(ids) AND n.state = 'received' AND n.device_ids IS NOT NULL
        UNION ALL
        SELECT n.id, NULL, NULL, n.silent, n.send_at
        FROM herald.notifications n
        WHERE n.id = ANY(ids) AND n.state = 'received' AND n.topic IS NOT NULL
    ), created_deliveries AS (
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind)
        SELECT t.notification_id, t.device_id,
               CASE WHEN t.platform IS NULL THEN 'topic'
                    WHEN t.platform = 'android' THEN 'android_data'
                    WHEN t.silent THEN 'ios_background'
                    ELSE 'ios_alert' END
        FROM targets t
        RETURNING id, notification_id
    )
    INSERT INTO herald.jobs (kind, ref, run_at)
    SELECT 'dispatch', c.id, greatest(at, coalesce(n.send_at, at))
    FROM created_deliveries c JOIN herald.notifications n ON n.id = c.notification_id;
    GET DIAGNOSTICS created = ROW_COUNT;

    UPDATE herald.notifications n
    SET state = CASE WHEN EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.notification_id = n.id)
                     THEN 'accepted' ELSE 'no_devices' END,
        reason = CASE WHEN EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.notification_id = n.id) THEN NULL
                      WHEN n.user_ref IS NOT NULL
                      THEN format('user %s has no enabled device', quote_literal(n.user_ref))
                      ELSE format('none of the devices %s is registered and enabled', array_to_string(n.device_ids, ', '))
                 END,
        ingested_at = at
    WHERE n.id = ANY(ids) AND n.state = 'received';

    RETURN QUERY
    SELECT count(*) FILTER (WHERE n.state = 'accepted')::int,
           count(*) FILTER (WHERE n.state = 'rejected')::int,
           count(*) FILTER (WHERE n.state = 'expired')::int,
           count(*) FILTER (WHERE n.state = 'no_devices')::int,
           created
    FROM herald.notifications n WHERE n.id = ANY(ids) AND n.ingested_at = at;
END;
$$;
