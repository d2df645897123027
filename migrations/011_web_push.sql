-- 011: browsers as a third platform (Web Push), and configuration problems scoped to what
-- they are about.
--
-- A web device's push token is its push subscription's endpoint, and its keys sit beside it.
-- Producers register one with the browser's PushSubscription.toJSON() as the token:
--
--   SELECT * FROM herald.register_device('shop', 'browser-7f3a', 'web',
--       '{"endpoint": "https://push.example.net/send/abc…", "keys": {"p256dh": "BCVx…", "auth": "BTBZ…"}}', 'user-42');
--
-- Each app that sends to browsers names its VAPID key (a P-256 private key in PEM, a path
-- like credentials_file; `herald vapid-key` makes one) and the contact the push services
-- see (mailto: or https:).
--
-- A configuration problem used to stop the whole app: one iPhone's 401 THIRD_PARTY_AUTH_ERROR
-- (the APNs key in Firebase) made every Android delivery of the app wait for the next probe.
-- Problems are now kept per scope:
--   fcm       the app's FCM credentials: everything sent through FCM waits;
--   fcm_apns  the app's APNs setup in Firebase: iOS deliveries through FCM wait;
--   web       the app's VAPID key or subject: deliveries to browsers wait.

ALTER TABLE herald.devices DROP CONSTRAINT devices_platform_check;
ALTER TABLE herald.devices
    ADD CONSTRAINT devices_platform_check CHECK (platform IN ('android', 'ios', 'web')),
    -- A browser's subscription keys (RFC 8291): its P-256 public key, 65 bytes uncompressed,
    -- and the 16-byte authentication secret. The endpoint is push_token.
    ADD COLUMN web_p256dh bytea,
    ADD COLUMN web_auth bytea,
    ADD CONSTRAINT "a web device has its subscription's keys"
        CHECK (platform <> 'web' OR push_token IS NULL OR (octet_length(web_p256dh) = 65 AND octet_length(web_auth) = 16));

ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic', 'web'));

ALTER TABLE herald.apps
    -- The app's VAPID private key (PEM, P-256); NULL: the app does not send to browsers.
    ADD COLUMN vapid_key_file text,
    -- Who the push services can contact about this sender.
    ADD COLUMN vapid_subject text CHECK (vapid_subject LIKE 'mailto:%' OR vapid_subject LIKE 'https://%');

-- The dispatch worker writes these: a row while a scope's configuration fails, deleted when a
-- send shows it works again.
CREATE TABLE herald.app_config_problems (
    app_id     text NOT NULL REFERENCES herald.apps ON UPDATE CASCADE ON DELETE CASCADE,
    scope      text NOT NULL CHECK (scope IN ('fcm', 'fcm_apns', 'web')),
    problem    text NOT NULL,
    -- When this problem was first seen.
    since      timestamptz NOT NULL,
    -- When a send last confirmed it: the next probe goes out a minute after.
    failed_at  timestamptz NOT NULL,
    PRIMARY KEY (app_id, scope)
);
INSERT INTO herald.app_config_problems (app_id, scope, problem, since, failed_at)
SELECT app_id, CASE WHEN config_error LIKE '%THIRD_PARTY_AUTH_ERROR%' THEN 'fcm_apns' ELSE 'fcm' END,
       config_error, config_error_at, config_error_at
FROM herald.apps
WHERE config_error IS NOT NULL;

DROP VIEW herald.app_problems;
ALTER TABLE herald.apps DROP COLUMN config_error, DROP COLUMN config_error_at;

-- Apps whose configuration fails now, one row per scope, with what waits because of it.
CREATE VIEW herald.app_problems AS
SELECT p.app_id, a.fcm_project_id, p.problem AS config_error, p.since AS config_error_at, p.scope, p.failed_at,
       CASE p.scope WHEN 'fcm' THEN 'every delivery through FCM'
                    WHEN 'fcm_apns' THEN 'iOS deliveries through FCM'
                    WHEN 'web' THEN 'deliveries to browsers' END AS waiting
FROM herald.app_config_problems p
JOIN herald.apps a ON a.app_id = p.app_id;
GRANT SELECT ON herald.app_problems TO herald_operator;

-- Validates a browser's PushSubscription.toJSON() and returns what Herald keeps of it.
CREATE FUNCTION herald.web_subscription(subscription text, OUT endpoint text, OUT p256dh bytea, OUT auth bytea)
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parsed jsonb;
    hint constant text := 'a web device''s push_token is the browser''s PushSubscription as JSON: '
                          '{"endpoint": "https://…", "keys": {"p256dh": "…", "auth": "…"}}';
BEGIN
    BEGIN
        parsed := subscription::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        RAISE EXCEPTION 'herald.register_device: % (this is not JSON)', hint USING ERRCODE = 'check_violation';
    END;
    endpoint := parsed ->> 'endpoint';
    IF jsonb_typeof(parsed) <> 'object' OR endpoint IS NULL THEN
        RAISE EXCEPTION 'herald.register_device: % (no endpoint)', hint USING ERRCODE = 'check_violation';
    END IF;
    IF endpoint !~ '^https://[^/?#]+' THEN
        RAISE EXCEPTION 'herald.register_device: a web subscription''s endpoint must be an https:// URL, not %',
            quote_literal(left(endpoint, 40)) USING ERRCODE = 'check_violation';
    END IF;
    p256dh := herald.base64url_decode(parsed #>> '{keys,p256dh}');
    auth := herald.base64url_decode(parsed #>> '{keys,auth}');
    IF p256dh IS NULL OR octet_length(p256dh) <> 65 OR get_byte(p256dh, 0) <> 4 THEN
        RAISE EXCEPTION 'herald.register_device: keys.p256dh must be the browser''s P-256 public key, 65 bytes in base64url (87 characters)'
            USING ERRCODE = 'check_violation';
    END IF;
    IF auth IS NULL OR octet_length(auth) <> 16 THEN
        RAISE EXCEPTION 'herald.register_device: keys.auth must be the subscription''s 16-byte secret in base64url (22 characters)'
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.web_subscription(text) FROM PUBLIC;

-- base64url, with or without padding, as browsers write keys; NULL for anything else.
CREATE FUNCTION herald.base64url_decode(text text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF text IS NULL OR text !~ '^[A-Za-z0-9_-]*={0,2}$' THEN RETURN NULL; END IF;
    text := rtrim(text, '=');
    RETURN decode(rpad(translate(text, '-_', '+/'), (length(text) + 3) / 4 * 4, '='), 'base64');
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN NULL;
END;
$$;

-- A token as the views show it: an FCM or APNs token's first 8 characters; for a Web Push
-- endpoint, which is as secret as a token, its origin and the first 8 characters of its last
-- path segment.
CREATE OR REPLACE FUNCTION herald.token_hint(token text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN token IS NULL THEN NULL
                WHEN token LIKE 'https://%' THEN
                    substring(token FROM '^https://[^/]+') || '/…' || left(substring(token FROM '[^/]*$'), 8) || '…'
                ELSE left(token, 8) || '…' END;
$$;

-- 002's registration, taking a browser's subscription for a web device.
CREATE OR REPLACE FUNCTION herald.register_device(
    app text, device text, platform text, push_token text, user_ref text DEFAULT NULL,
    OUT device_row_id bigint, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    existing herald.devices;
    -- What the device row keeps: the token, or for a browser its endpoint and keys.
    token text := push_token;
    p256dh bytea;
    auth bytea;
BEGIN
    IF platform NOT IN ('android', 'ios', 'web') THEN
        RAISE EXCEPTION 'herald.register_device: platform must be ''android'', ''ios'' or ''web'', not %',
            quote_literal(platform) USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(push_token, '') = '' THEN
        RAISE EXCEPTION 'herald.register_device: push_token is empty' USING ERRCODE = 'check_violation';
    END IF;
    IF platform = 'web' THEN
        SELECT s.endpoint, s.p256dh, s.auth INTO token, p256dh, auth FROM herald.web_subscription(push_token) AS s;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM herald.apps a WHERE a.app_id = app) THEN
        RAISE EXCEPTION 'herald.register_device: unknown app %; add it to herald.apps first', quote_literal(app)
            USING ERRCODE = 'foreign_key_violation';
    END IF;

    -- Tokens are unique per app: take it from any other device that holds it.
    UPDATE herald.devices d
    SET push_token = NULL, disabled_at = now(), disabled_cause = 'token_moved',
        disabled_reason = format('its push token was registered again by device %s', device)
    WHERE d.app_id = app AND d.push_token = token AND d.device_id <> device;

    INSERT INTO herald.devices AS d (app_id, device_id, platform, push_token, user_ref, web_p256dh, web_auth)
    VALUES (app, device, platform, token, register_device.user_ref, p256dh, auth)
    ON CONFLICT (app_id, device_id) DO NOTHING
    RETURNING d.id INTO device_row_id;
    IF FOUND THEN
        status := 'registered';
        RETURN;
    END IF;

    SELECT * INTO existing FROM herald.devices d WHERE d.app_id = app AND d.device_id = device FOR UPDATE;
    device_row_id := existing.id;
    IF existing.disabled_cause = 'token_invalid' AND existing.push_token = token THEN
        -- FCM said this token is dead; registering it again does not make it live.
        UPDATE herald.devices d SET platform = register_device.platform, user_ref = register_device.user_ref,
            registered_at = now(), web_p256dh = p256dh, web_auth = auth
        WHERE d.id = existing.id;
        status := 'token_invalid';
        RETURN;
    END IF;
    UPDATE herald.devices d
    SET platform = register_device.platform, push_token = token,
        user_ref = register_device.user_ref, registered_at = now(), web_p256dh = p256dh, web_auth = auth,
        disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    WHERE d.id = existing.id;
    status := CASE WHEN existing.disabled_at IS NULL THEN 'registered' ELSE 're-enabled' END;
END;
$$;

-- 010's ingest, with deliveries to browsers (payload kind 'web').
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
               -- A web device cannot take a payload this large; the others can.
               CASE WHEN size.bytes + 24 > size.web_limit_bytes THEN
                        format('payload is about %s bytes, %s over Web Push''s %s bytes of plaintext; shorten the title, body or data',
                               size.bytes + 24, size.bytes + 24 - size.web_limit_bytes, size.web_limit_bytes)
               END AS web_problem,
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
        -- plus Herald's own keys and is the larger of the two mobile platforms' payloads. A
        -- browser's JSON document carries the same, and must fit Web Push's 4096 bytes of
        -- ciphertext once encrypted: 3993 bytes of plaintext (RFC 8291: a 86-byte header, a
        -- 16-byte tag and a padding delimiter).
        CROSS JOIN LATERAL (
            SELECT octet_length(
                       (coalesce(entries.data, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
                           'title', n.title, 'body', n.body, 'image_url', n.image_url, 'deep_link', n.deep_link,
                           'sound', n.sound, 'channel_id', n.android_channel_id)))::text)
                   + 160 AS bytes,  -- herald_notification_id, herald_report and their quoting
                   CASE WHEN n.topic IS NULL THEN 4096 ELSE 2048 END AS limit_bytes,
                   3993 AS web_limit_bytes
        ) AS size
        WHERE n.id = ANY(ids) AND n.state = 'received'
    ), live AS (
        SELECT * FROM normalized WHERE problem IS NULL AND expires_at > run_at
    ), targets AS (
        SELECT l.id AS notification_id, d.id AS device_id, d.platform, l.silent, l.run_at,
               CASE WHEN d.platform = 'web' THEN l.web_problem END AS web_problem
        FROM live l
        JOIN herald.devices d ON d.app_id = l.app_id AND d.user_ref = l.user_ref AND d.disabled_at IS NULL
        WHERE l.user_ref IS NOT NULL
        UNION ALL
        SELECT l.id, d.id, d.platform, l.silent, l.run_at, CASE WHEN d.platform = 'web' THEN l.web_problem END
        FROM live l
        CROSS JOIN LATERAL (SELECT DISTINCT unnest(l.device_ids) AS device_id) AS wanted
        JOIN herald.devices d ON d.app_id = l.app_id AND d.device_id = wanted.device_id AND d.disabled_at IS NULL
        WHERE l.device_ids IS NOT NULL
        UNION ALL
        SELECT l.id, NULL, NULL, l.silent, l.run_at, NULL FROM live l WHERE l.topic IS NOT NULL
    ), created AS (
        -- Each delivery is queued in place, due at send_at or now; one for a browser that
        -- cannot take the payload fails here, with the reason.
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at, state, last_error, error_history,
                                       finished_at)
        SELECT t.notification_id, t.device_id,
               CASE WHEN t.platform IS NULL THEN 'topic'
                    WHEN t.platform = 'android' THEN 'android_data'
                    WHEN t.platform = 'web' THEN 'web'
                    WHEN t.silent THEN 'ios_background'
                    ELSE 'ios_alert' END,
               t.run_at,
               CASE WHEN t.web_problem IS NULL THEN 'queued' ELSE 'failed' END,
               t.web_problem,
               CASE WHEN t.web_problem IS NULL THEN '{}'::text[]
                    ELSE ARRAY[format('%s %s', to_char(at, 'YYYY-MM-DD HH24:MI:SS'), t.web_problem)] END,
               CASE WHEN t.web_problem IS NOT NULL THEN at END
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

-- 010's claim, with a browser's subscription keys and the app's VAPID setup, and the
-- configuration problem that holds each delivery back: the one of its own scope.
DROP FUNCTION herald.claim_deliveries(timestamptz, int, text, interval);
CREATE FUNCTION herald.claim_deliveries(at timestamptz, batch int, worker text, lease interval)
RETURNS TABLE (delivery_id bigint, notification_id bigint, payload_kind text, attempts int, abandoned_by text,
               device_id bigint, push_token text, device_disabled_reason text, web_p256dh bytea, web_auth bytea,
               app_id text, fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text,
               config_error_at timestamptz,
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
           dev.web_p256dh, dev.web_auth,
           n.app_id, a.fcm_project_id, a.credentials_file, a.vapid_key_file, a.vapid_subject,
           (SELECT max(p.failed_at) FROM herald.app_config_problems p
            WHERE p.app_id = n.app_id
              AND p.scope = ANY (CASE WHEN c.payload_kind = 'web' THEN '{web}'::text[]
                                      WHEN c.payload_kind LIKE 'ios%' THEN '{fcm,fcm_apns}'::text[]
                                      ELSE '{fcm}'::text[] END)),
           n.topic, n.title, n.body, n.data::text, n.image_url, n.sound, n.badge,
           n.android_channel_id, n.ios_category, n.ios_thread_id, n.deep_link,
           n.priority, n.expires_at, n.collapse_key, n.silent, n.dry_run
    FROM claimed c
    JOIN herald.notifications n ON n.id = c.notification_id
    JOIN herald.apps a ON a.app_id = n.app_id
    LEFT JOIN herald.devices dev ON dev.id = c.device_id;
$$;
REVOKE ALL ON FUNCTION herald.claim_deliveries(timestamptz, int, text, interval) FROM PUBLIC;
