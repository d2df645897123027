-- producers: the producer's contract (docs/producers.md): who acts for which app, herald.send,
-- herald.register_device with a browser's subscription checks, herald.unregister_device.
-- A plain INSERT into herald.notifications is checked by row-level security (migration 015),
-- which calls herald.producer_app_ids.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- The apps this session acts for as a producer, for row-level security: one call per
-- statement (an InitPlan), not one per row.
CREATE OR REPLACE FUNCTION herald.producer_app_ids() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(DISTINCT g.app_id), '{}')
    FROM herald.producer_apps g
    WHERE pg_has_role(session_user, g.producer, 'MEMBER');
$$;
REVOKE ALL ON FUNCTION herald.producer_app_ids() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.producer_app_ids() TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.producer_app_ids() TO herald_producer;

-- Whether this session may act for the app. session_user, because inside a SECURITY DEFINER
-- function current_user is the function's owner.
CREATE OR REPLACE FUNCTION herald.acts_for(app text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT pg_has_role(session_user, 'herald_producer', 'MEMBER')
        OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user)
        OR EXISTS (SELECT 1 FROM herald.producer_apps g
                   WHERE g.app_id = app AND pg_has_role(session_user, g.producer, 'MEMBER'));
$$;
REVOKE ALL ON FUNCTION herald.acts_for(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.acts_for(text) TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.acts_for(text) TO herald_producer;

-- Refuses, with what to do, a session that may not act for the app. The same words for an
-- app that does not exist: a producer learns nothing of other apps.
CREATE OR REPLACE FUNCTION herald.check_acts_for(app text, caller text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT herald.acts_for(app) THEN
        RAISE EXCEPTION '%: role % may not act for app %', caller, session_user, quote_literal(app)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = format('an operator grants it: INSERT INTO herald.producer_apps (producer, app_id) VALUES (%L, %L)',
                                session_user, app);
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.check_acts_for(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.check_acts_for(text,text) TO herald_daemon;

-- The trigger notifications_idempotency_key (migration 020, on herald.notifications_rotating,
-- where every new row goes) calls it for each new notification with an idempotency key: the key
-- is claimed in herald.idempotency_keys, unique across every partition, before the row is
-- written, and a key the app used already skips the row (as ON CONFLICT DO NOTHING did before
-- the table was partitioned). Keys that start with herald- are Herald's own wake-ups'.
CREATE OR REPLACE FUNCTION herald.claim_idempotency_key() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Refused here first, so that a key another app used tells a producer nothing about it.
    PERFORM herald.check_acts_for(NEW.app_id, 'INSERT INTO herald.notifications');
    IF NEW.origin = 'producer' AND NEW.idempotency_key LIKE 'herald-%' THEN
        RAISE EXCEPTION 'idempotency keys starting with herald- are Herald''s own: send it again with another key'
            USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO herald.idempotency_keys (app_id, idempotency_key, notification_id, created_at)
    VALUES (NEW.app_id, NEW.idempotency_key, NEW.id, NEW.created_at)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END;
$$;
REVOKE ALL ON FUNCTION herald.claim_idempotency_key() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- The most a notification may hold, all its columns together (its data, title, body, devices,
-- …): no provider takes a payload over 5 KiB, and rows of megabytes cost every app's ingest
-- seconds each. The trigger notifications_refuse_oversized (migration 044) refuses a larger one
-- at its INSERT, with herald.refuse_oversized_notification's message.
CREATE OR REPLACE FUNCTION herald.max_notification_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 65536 $$;
REVOKE ALL ON FUNCTION herald.max_notification_bytes() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.max_notification_bytes() TO PUBLIC;

-- Refuses the notification being inserted: the trigger calls it only for one over
-- herald.max_notification_bytes(), so the usual insert runs no function.
CREATE OR REPLACE FUNCTION herald.refuse_oversized_notification() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'a notification is at most % bytes, its data, title, body, devices and other fields together, and this one is % (herald.max_notification_bytes()): no provider takes a payload over 5 KiB; shorten its data, title or body, or name fewer devices',
        herald.max_notification_bytes(), pg_column_size(NEW.*) USING ERRCODE = 'check_violation';
END;
$$;
REVOKE ALL ON FUNCTION herald.refuse_oversized_notification() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- base64url, with or without padding, as browsers write keys; NULL for anything else.
CREATE OR REPLACE FUNCTION herald.base64url_decode(text text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF text IS NULL OR text !~ '^[A-Za-z0-9_-]*={0,2}$' THEN RETURN NULL; END IF;
    text := rtrim(text, '=');
    RETURN decode(rpad(translate(text, '-_', '+/'), (length(text) + 3) / 4 * 4, '='), 'base64');
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.base64url_decode(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.base64url_decode(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION herald.base64url_decode(text) TO herald_daemon;

-- Whether 65 bytes are an uncompressed point on P-256 (y² = x³ − 3x + b mod p), as a browser's
-- p256dh must be. ECDH with a point off the curve fails, and only that device can fix it.
CREATE OR REPLACE FUNCTION herald.is_p256_point(point bytea) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    p constant numeric := 115792089210356248762697446949407573530086143415290314195533631308867097853951;
    b constant numeric := 41058363725152142129326129780047268409114441015993725554835256314039467401291;
    x numeric := 0;
    y numeric := 0;
BEGIN
    IF point IS NULL OR octet_length(point) <> 65 OR get_byte(point, 0) <> 4 THEN RETURN false; END IF;
    FOR i IN 1..32 LOOP
        x := x * 256 + get_byte(point, i);
        y := y * 256 + get_byte(point, i + 32);
    END LOOP;
    RETURN x < p AND y < p AND mod(y * y - (x * x * x - 3 * x + b), p) = 0;
END;
$$;
REVOKE ALL ON FUNCTION herald.is_p256_point(bytea) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.is_p256_point(bytea) TO herald_daemon;

-- A Web Push subscription as JSON (a browser's, or a UnifiedPush distributor's endpoint and
-- keys): its endpoint and keys; p256dh must be on the curve.
CREATE OR REPLACE FUNCTION herald.web_subscription(subscription text, OUT endpoint text, OUT p256dh bytea,
    OUT auth bytea) RETURNS record
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parsed jsonb;
    hint constant text := 'this push_token is the browser''s PushSubscription as JSON (or a UnifiedPush '
                          'endpoint with its keys): {"endpoint": "https://…", "keys": {"p256dh": "…", "auth": "…"}}';
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
        RAISE EXCEPTION 'herald.register_device: a subscription''s endpoint must be an https:// URL, not %',
            quote_literal(left(endpoint, 40)) USING ERRCODE = 'check_violation';
    END IF;
    p256dh := herald.base64url_decode(parsed #>> '{keys,p256dh}');
    auth := herald.base64url_decode(parsed #>> '{keys,auth}');
    IF p256dh IS NULL OR octet_length(p256dh) <> 65 OR get_byte(p256dh, 0) <> 4 THEN
        RAISE EXCEPTION 'herald.register_device: keys.p256dh must be the browser''s P-256 public key, 65 bytes in base64url (87 characters)'
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT herald.is_p256_point(p256dh) THEN
        RAISE EXCEPTION 'herald.register_device: keys.p256dh is 65 bytes but not a point on P-256: send the browser''s key unchanged'
            USING ERRCODE = 'check_violation';
    END IF;
    IF auth IS NULL OR octet_length(auth) <> 16 THEN
        RAISE EXCEPTION 'herald.register_device: keys.auth must be the subscription''s 16-byte secret in base64url (22 characters)'
            USING ERRCODE = 'check_violation';
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.web_subscription(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.web_subscription(text) TO herald_daemon;

-- The notification an app's idempotency key was first used for (herald.idempotency_keys).
CREATE OR REPLACE FUNCTION herald.notification_of_key(app text, key text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT k.notification_id FROM herald.idempotency_keys k WHERE k.app_id = app AND k.idempotency_key = key;
$$;
REVOKE ALL ON FUNCTION herald.notification_of_key(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.notification_of_key(text,text) TO herald_daemon;

-- Send a notification. Returns its id; with an idempotency key already used by this app,
-- returns the first notification's id and sends nothing more. Keys that start with herald- are
-- Herald's own. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.send(app text, user_ref text DEFAULT NULL, device_ids text[] DEFAULT NULL,
    topic text DEFAULT NULL, title text DEFAULT NULL, body text DEFAULT NULL, data jsonb DEFAULT NULL,
    image_url text DEFAULT NULL, sound text DEFAULT NULL, badge integer DEFAULT NULL,
    android_channel_id text DEFAULT NULL, ios_category text DEFAULT NULL, ios_thread_id text DEFAULT NULL,
    deep_link text DEFAULT NULL, idempotency_key text DEFAULT NULL, priority text DEFAULT NULL,
    ttl interval DEFAULT NULL, expires_at timestamptz DEFAULT NULL, collapse_key text DEFAULT NULL,
    send_at timestamptz DEFAULT NULL, silent boolean DEFAULT false, dry_run boolean DEFAULT false,
    ios_interruption_level text DEFAULT NULL, ios_relevance_score double precision DEFAULT NULL,
    ios_filter_criteria text DEFAULT NULL, ios_target_content_id text DEFAULT NULL,
    android_direct_boot_ok boolean DEFAULT NULL, android_proxy text DEFAULT NULL, message_class text DEFAULT NULL)
    RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    notification_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.send');
    INSERT INTO herald.notifications AS n (
        app_id, idempotency_key, user_ref, device_ids, topic, title, body, data, image_url, sound, badge,
        android_channel_id, ios_category, ios_thread_id, deep_link, priority, ttl, expires_at, collapse_key,
        send_at, silent, dry_run, ios_interruption_level, ios_relevance_score, ios_filter_criteria,
        ios_target_content_id, android_direct_boot_ok, android_proxy, message_class)
    VALUES (
        app, send.idempotency_key, send.user_ref, send.device_ids, send.topic, send.title, send.body, send.data,
        send.image_url, send.sound, send.badge, send.android_channel_id, send.ios_category, send.ios_thread_id,
        send.deep_link, send.priority, send.ttl, send.expires_at, send.collapse_key, send.send_at,
        coalesce(send.silent, false), coalesce(send.dry_run, false), send.ios_interruption_level,
        send.ios_relevance_score, send.ios_filter_criteria, send.ios_target_content_id, send.android_direct_boot_ok,
        send.android_proxy, send.message_class)
    RETURNING n.id INTO notification_id;
    -- Without a row, herald.claim_idempotency_key skipped it: the key was used.
    RETURN coalesce(notification_id, herald.notification_of_key(app, send.idempotency_key));
END;
$$;
REVOKE ALL ON FUNCTION herald.send(text,text,text[],text,text,text,jsonb,text,text,integer,text,text,text,text,text,text,interval,timestamp with time zone,text,timestamp with time zone,boolean,boolean,text,double precision,text,text,boolean,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.send(text,text,text[],text,text,text,jsonb,text,text,integer,text,text,text,text,text,text,interval,timestamp with time zone,text,timestamp with time zone,boolean,boolean,text,double precision,text,text,boolean,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.send(text,text,text[],text,text,text,jsonb,text,text,integer,text,text,text,text,text,text,interval,timestamp with time zone,text,timestamp with time zone,boolean,boolean,text,double precision,text,text,boolean,text,text) TO herald_daemon;

-- Register a device, or refresh its token. Returns the device's row id and what happened:
--   'registered'     new, or updated while enabled;
--   're-enabled'     it had been disabled (logout, dead or moved token) and is enabled again;
--   'token_invalid'  the same token that a provider declared dead: the device stays disabled.
-- A token held by another device of the same app moves here; that device is disabled.
-- A registration after a logout (herald.unregister_device) or for another user_ref is a new
-- one: the references the device received before it no longer read anything.
-- token_kind is said, or decided by the platform and the app ('web' devices take a browser's
-- subscription, whose endpoint must follow the app's policy and whose p256dh must be on the
-- curve). Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.register_device(app text, device text, platform text, push_token text,
    user_ref text DEFAULT NULL, token_kind text DEFAULT NULL, OUT device_row_id bigint, OUT status text)
    RETURNS record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    existing herald.devices;
    -- What the device row keeps: the token, or for a browser its endpoint and keys.
    token text := push_token;
    p256dh bytea;
    auth bytea;
    kind text := token_kind;
    kind_row herald.token_kinds;
    app_row herald.apps;
    platform_row herald.platforms;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.register_device');
    SELECT * INTO platform_row FROM herald.platforms p WHERE p.platform = register_device.platform;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.register_device: platform must be one of herald.platforms (%), not %',
            (SELECT string_agg(format('%L: %s', p.platform, p.description), ', ' ORDER BY p.platform)
             FROM herald.platforms p),
            quote_literal(platform) USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(push_token, '') = '' THEN
        RAISE EXCEPTION 'herald.register_device: push_token is empty' USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(device, '') = '' OR device ~ '[[:cntrl:]]' OR octet_length(device) > 256 THEN
        RAISE EXCEPTION 'herald.register_device: device must be 1 to 256 bytes without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    IF octet_length(push_token) > 8192 THEN
        RAISE EXCEPTION 'herald.register_device: push_token must be the token as the platform gave it: at most 8192 bytes, without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT * INTO app_row FROM herald.apps a WHERE a.app_id = app;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.register_device: unknown app %; add it to herald.apps first', quote_literal(app)
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    -- What the token is decides how it is sent. Unsaid: the one of the transport the app chose for
    -- the platform (an APNs device token for iOS when the app sends to APNs directly), or else the
    -- platform's own.
    kind := coalesce(kind, (SELECT t.token_kind FROM herald.transport_token_kinds t
                            WHERE t.platform = register_device.platform AND t.transport = app_row.ios_transport),
                     platform_row.default_token_kind);
    SELECT * INTO kind_row FROM herald.token_kinds k WHERE k.token_kind = kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.register_device: token_kind must be one of herald.token_kinds (%), not %',
            (SELECT string_agg(format('%L: %s', k.token_kind, k.description), ', ' ORDER BY k.token_kind)
             FROM herald.token_kinds k WHERE k.token_kind NOT IN (SELECT p.token_kind FROM herald.push_types p)),
            quote_literal(kind) USING ERRCODE = 'check_violation';
    END IF;
    -- A device's own token takes its notifications; a widget, VoIP, location or Push to Talk
    -- token goes beside it.
    IF EXISTS (SELECT FROM herald.push_types p WHERE p.token_kind = kind) THEN
        RAISE EXCEPTION 'herald.register_device: % is a token for % pushes, not the device''s own: register the device with its notification token, and this one beside it (docs/producers.md, "Widgets, VoIP, location and Push to Talk")',
            kind, (SELECT quote_literal(p.push_type) FROM herald.push_types p WHERE p.token_kind = kind)
            USING ERRCODE = 'check_violation';
    END IF;
    IF platform <> ALL(kind_row.platforms) THEN
        RAISE EXCEPTION 'herald.register_device: a token of kind % cannot belong to a device of platform %', kind, platform
            USING ERRCODE = 'check_violation';
    END IF;
    -- A subscription (a browser's, a UnifiedPush distributor's) is JSON: its endpoint becomes the
    -- token, its keys are kept beside it, and the endpoint must follow the app's policy.
    IF kind_row.endpoint_policy IS NOT NULL THEN
        SELECT s.endpoint, s.p256dh, s.auth INTO token, p256dh, auth FROM herald.web_subscription(push_token) AS s;
        PERFORM herald.check_push_endpoint(token, app, kind_row);
    ELSIF push_token ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'herald.register_device: push_token must be the token as the platform gave it: at most 8192 bytes, without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    IF push_token !~ kind_row.shape THEN
        RAISE EXCEPTION 'herald.register_device: % is %, not % characters like %', kind_row.description,
            kind_row.shape_description, length(push_token), quote_literal(left(push_token, 8) || '…')
            USING ERRCODE = 'check_violation';
    END IF;
    IF kind_row.lowercase THEN
        token := lower(token);
    END IF;

    -- Tokens are unique per app: take it from any other device that holds it.
    UPDATE herald.devices d
    SET push_token = NULL, disabled_at = now(), disabled_cause = 'token_moved',
        disabled_reason = format('its push token was registered again by device %s', device)
    WHERE d.app_id = app AND d.push_token = token AND d.device_id <> device;

    INSERT INTO herald.devices AS d (app_id, device_id, platform, push_token, user_ref, web_p256dh, web_auth, token_kind)
    VALUES (app, device, platform, token, register_device.user_ref, p256dh, auth, kind)
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
            registered_at = now(), web_p256dh = p256dh, web_auth = auth, token_kind = kind,
            registration_started_at = CASE WHEN existing.user_ref IS DISTINCT FROM register_device.user_ref
                                           THEN now() ELSE existing.registration_started_at END
        WHERE d.id = existing.id;
        status := 'token_invalid';
        RETURN;
    END IF;
    UPDATE herald.devices d
    SET platform = register_device.platform, push_token = token,
        user_ref = register_device.user_ref, registered_at = now(), web_p256dh = p256dh, web_auth = auth,
        token_kind = kind,
        disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL,
        -- A new token is a new install or a new provider: what a receipt said of the old one's
        -- notifications is not known of it.
        notifications_off_at = CASE WHEN existing.push_token IS DISTINCT FROM token THEN NULL
                                    ELSE existing.notifications_off_at END,
        notifications_off_reason = CASE WHEN existing.push_token IS DISTINCT FROM token THEN NULL
                                        ELSE existing.notifications_off_reason END,
        -- After a logout, or for another user, a new registration: the references the device
        -- received before read nothing more (herald.pending_notifications).
        registration_started_at = CASE WHEN existing.disabled_cause = 'logout'
                                            OR existing.user_ref IS DISTINCT FROM register_device.user_ref
                                       THEN now() ELSE existing.registration_started_at END
    WHERE d.id = existing.id;
    status := CASE WHEN existing.disabled_at IS NULL THEN 'registered' ELSE 're-enabled' END;
END;
$$;
REVOKE ALL ON FUNCTION herald.register_device(text,text,text,text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.register_device(text,text,text,text,text,text) TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.register_device(text,text,text,text,text,text) TO herald_producer;

-- The channel an app's device changes are announced on: 'herald_device_changes_' and 32 hex
-- digits of an HMAC of the app's id under Herald's report secret (herald.reference_tag, with a
-- prefix no report reference has), so that no other app's producer can learn it, and LISTEN to
-- this app's changes or to when they happen. herald.device_changes_channel gives it to the app's
-- producers.
CREATE OR REPLACE FUNCTION herald.device_changes_channel_of(app text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT 'herald_device_changes_'
           || encode(herald.reference_tag(convert_to('device changes of ' || app, 'UTF8'), s.inner_pad, s.outer_pad),
                     'hex')
    FROM herald.secrets s
    WHERE s.name = 'report_hmac';
$$;
REVOKE ALL ON FUNCTION herald.device_changes_channel_of(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- The trigger devices_record_changes (migration 039) calls it when a device is disabled, or
-- enabled again, whichever function did it, and devices_record_notification_changes (054) when a
-- provider's receipt says its notifications are turned off, or on again: the change goes to
-- herald.device_changes for the app's backend, and a NOTIFY on the app's own channel
-- (herald.device_changes_channel), with the app's id as payload, tells those who listen (once
-- per transaction and app: PostgreSQL folds identical notifications).
CREATE OR REPLACE FUNCTION herald.record_device_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    change text;
    reason text;
BEGIN
    IF TG_NAME = 'devices_record_notification_changes' THEN
        change := CASE WHEN NEW.notifications_off_at IS NULL THEN 'notifications_on' ELSE 'notifications_off' END;
        reason := NEW.notifications_off_reason;
    ELSE
        change := CASE NEW.disabled_cause WHEN 'token_invalid' THEN 'token_invalid' WHEN 'token_moved' THEN 'token_moved'
                                          WHEN 'logout' THEN 'logged_out' WHEN 'operator' THEN 'disabled'
                                          ELSE 'enabled' END;
        reason := NEW.disabled_reason;
    END IF;
    INSERT INTO herald.device_changes (app_id, device_id, change, reason, token_hint)
    VALUES (NEW.app_id, NEW.device_id, change, reason, herald.token_hint(coalesce(NEW.push_token, OLD.push_token)));
    PERFORM pg_notify(herald.device_changes_channel_of(NEW.app_id), NEW.app_id);
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.record_device_change() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_device_change() TO herald_daemon;

-- Log a device out: it is disabled, with the reason, until it registers again.
-- Returns false when the device is unknown. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.unregister_device(app text, device text, reason text DEFAULT 'logged out')
    RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.unregister_device');
    UPDATE herald.devices d
    SET disabled_at = coalesce(d.disabled_at, now()), disabled_cause = 'logout', disabled_reason = reason
    WHERE d.app_id = app AND d.device_id = device;
    RETURN FOUND;
END;
$$;
REVOKE ALL ON FUNCTION herald.unregister_device(text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.unregister_device(text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.unregister_device(text,text,text) TO herald_daemon;

-- The row of herald.push_types named `name`, for `caller`; an error that lists them otherwise.
CREATE OR REPLACE FUNCTION herald.push_type_named(name text, caller text) RETURNS herald.push_types
LANGUAGE plpgsql STABLE AS $$
DECLARE
    type_row herald.push_types;
BEGIN
    SELECT * INTO type_row FROM herald.push_types p WHERE p.push_type = name;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: push_type must be one of herald.push_types (%), not %', caller,
            (SELECT string_agg(format('%L: %s', p.push_type, p.description), ', ' ORDER BY p.push_type)
             FROM herald.push_types p),
            coalesce(quote_literal(name), 'NULL') USING ERRCODE = 'check_violation';
    END IF;
    RETURN type_row;
END;
$$;
REVOKE ALL ON FUNCTION herald.push_type_named(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.push_type_named(text,text) TO herald_daemon;

-- The device a token is registered beside (for `caller`: herald.register_push_type_token,
-- herald.register_activity_token), locked, so that one registration at a time reads its tokens
-- (two for the same kind would both find none); an error when the app has no such device.
CREATE OR REPLACE FUNCTION herald.device_to_register_on(app text, device text, caller text) RETURNS herald.devices
LANGUAGE plpgsql AS $$
DECLARE
    dev herald.devices;
BEGIN
    SELECT * INTO dev FROM herald.devices d WHERE d.app_id = app AND d.device_id = device FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: unknown device % of app %: register it with herald.register_device first', caller,
            quote_literal(device), quote_literal(app) USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN dev;
END;
$$;
REVOKE ALL ON FUNCTION herald.device_to_register_on(text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.device_to_register_on(text,text,text) TO herald_daemon;

-- APNs' other push types (docs/producers.md#widgets-voip-location-and-push-to-talk):
-- WidgetKit's push updates, PushKit's VoIP calls, location queries and Push to Talk, each to a
-- token the app gets from that framework and registers through its backend, beside the device
-- (herald.push_types lists the types). A new token replaces the device's previous one of its type.
-- Returns the token's row id and what happened, as herald.register_device says it:
-- 'registered', 'unchanged' (the token already held), 're-enabled' (the type's token had been
-- unregistered, moved or declared dead), or 'token_invalid' (the very token APNs declared dead:
-- it stays disabled). A token held by another device of the app moves here. Only for an app the
-- session acts for.
CREATE OR REPLACE FUNCTION herald.register_push_type_token(app text, device text, push_type text, token text,
    OUT token_row_id bigint, OUT status text) RETURNS record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    caller constant text := 'herald.register_push_type_token';
    type_row herald.push_types;
    kind_row herald.token_kinds;
    dev herald.devices;
    existing herald.push_type_tokens;
    hex text := lower(token);
BEGIN
    PERFORM herald.check_acts_for(app, caller);
    type_row := herald.push_type_named(push_type, caller);
    SELECT * INTO kind_row FROM herald.token_kinds k WHERE k.token_kind = type_row.token_kind;
    IF token IS NULL OR token !~ kind_row.shape OR octet_length(token) > 8192 THEN
        RAISE EXCEPTION '%: % is %, not % characters like %', caller, kind_row.description,
            kind_row.shape_description, coalesce(length(token), 0), quote_literal(left(token, 8) || '…')
            USING ERRCODE = 'check_violation';
    END IF;
    dev := herald.device_to_register_on(app, device, caller);
    IF dev.platform <> ALL(kind_row.platforms) THEN
        RAISE EXCEPTION '%: % pushes are for %, and device % is %', caller, push_type,
            array_to_string(kind_row.platforms, ', '), quote_literal(device), dev.platform
            USING ERRCODE = 'check_violation';
    END IF;
    IF dev.disabled_at IS NOT NULL THEN
        RAISE EXCEPTION '%: device % is disabled (%): register it again with herald.register_device first', caller,
            quote_literal(device), dev.disabled_reason USING ERRCODE = 'check_violation';
    END IF;
    IF hex = dev.push_token THEN
        RAISE EXCEPTION '%: that is device %''s own notification token; a % token is %', caller, quote_literal(device),
            push_type, kind_row.description USING ERRCODE = 'check_violation';
    END IF;
    -- A token is one device's: held by another device of the app, it is disabled there. Two
    -- devices registering one token at once cannot both keep it: the unique index
    -- push_type_tokens_live makes the later one wait for the first to commit and then fail, and
    -- it tries again, moving the token from the first.
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            UPDATE herald.push_type_tokens t
            SET disabled_at = now(), disabled_cause = 'token_moved',
                disabled_reason = format('its token was registered again by device %s', device)
            WHERE t.app_id = app AND t.token_kind = type_row.token_kind AND t.token = hex AND t.device_id <> dev.id
              AND t.disabled_at IS NULL;
            INSERT INTO herald.push_type_tokens AS t (app_id, device_id, token_kind, token)
            VALUES (app, dev.id, type_row.token_kind, hex)
            ON CONFLICT (device_id, token_kind) DO NOTHING
            RETURNING t.id INTO token_row_id;
            IF FOUND THEN
                status := 'registered';
                RETURN;
            END IF;
            SELECT * INTO existing FROM herald.push_type_tokens t
            WHERE t.device_id = dev.id AND t.token_kind = type_row.token_kind FOR UPDATE;
            token_row_id := existing.id;
            IF existing.token = hex AND (existing.disabled_at IS NULL OR existing.disabled_cause = 'token_invalid') THEN
                -- The token held, or the one APNs declared dead: registering it again does not make it live.
                status := CASE WHEN existing.disabled_at IS NULL THEN 'unchanged' ELSE 'token_invalid' END;
                RETURN;
            END IF;
            UPDATE herald.push_type_tokens t
            SET token = hex, registered_at = now(), disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
            WHERE t.id = existing.id;
            status := CASE WHEN existing.disabled_at IS NULL THEN 'registered' ELSE 're-enabled' END;
            RETURN;
        EXCEPTION WHEN unique_violation THEN
            -- Another device's registration of the token committed meanwhile: the next attempt
            -- moves it here.
            IF attempt = 3 THEN
                RAISE EXCEPTION '%: the token kept being registered by other devices of app % at the same time; try again',
                    caller, quote_literal(app) USING ERRCODE = 'serialization_failure';
            END IF;
        END;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION herald.register_push_type_token(text,text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.register_push_type_token(text,text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.register_push_type_token(text,text,text,text) TO herald_daemon;

-- The app says the device's token of a push type is no longer good (PushKit invalidated it, the
-- user left the Push to Talk channel, the widgets were removed): it is disabled, and nothing of
-- that type goes to the device until it registers one. Returns whether a token was disabled.
-- Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.unregister_push_type_token(app text, device text, push_type text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.unregister_push_type_token');
    UPDATE herald.push_type_tokens t
    SET disabled_at = now(), disabled_cause = 'unregistered', disabled_reason = 'the app unregistered it'
    FROM herald.devices d, herald.push_types p
    WHERE d.id = t.device_id AND d.app_id = app AND d.device_id = device AND p.token_kind = t.token_kind
      AND p.push_type = unregister_push_type_token.push_type AND t.disabled_at IS NULL;
    RETURN FOUND;
END;
$$;
REVOKE ALL ON FUNCTION herald.unregister_push_type_token(text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.unregister_push_type_token(text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.unregister_push_type_token(text,text,text) TO herald_daemon;

-- Live Activities (docs/producers.md#live-activities). The app registers its tokens through its
-- backend: an iPhone's push-to-start token for an ActivityAttributes type (ActivityKit's
-- pushToStartToken, iOS 17.2 and later), and each running activity's update token (its
-- pushToken) with the activity's id. A new token replaces the device's previous one of the same
-- kind. Returns the token's row id and 'registered', or 'unchanged' for the token already held.
--
-- An update token of an activity Herald does not know yet (one the app started itself) makes the
-- activity, for the device's user. One registered after the activity's newest update or end was
-- sent (push-to-start, then updates before the new activity's token came) is sent that newest
-- event at once, so the activity catches up, and an ended one ends. Only for an app the session
-- acts for.
CREATE OR REPLACE FUNCTION herald.register_activity_token(app text, device text, token text, attributes_type text,
    activity text DEFAULT NULL, OUT token_row_id bigint, OUT status text) RETURNS record
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    caller constant text := 'herald.register_activity_token';
    hex text := lower(token);
    kind text := CASE WHEN activity IS NULL THEN 'push_to_start' ELSE 'update' END;
    dev herald.devices;
    act herald.live_activities;
    existing herald.activity_tokens;
    caught_up bigint;
BEGIN
    PERFORM herald.check_acts_for(app, caller);
    IF hex IS NULL OR hex !~ '^[0-9a-f]{64,200}$' THEN
        RAISE EXCEPTION '%: token must be the token ActivityKit gave, as hex: 64 to 200 hexadecimal digits', caller
            USING ERRCODE = 'check_violation';
    END IF;
    IF attributes_type IS NULL OR attributes_type !~ '^[A-Za-z_][A-Za-z0-9_.]{0,255}$' THEN
        RAISE EXCEPTION '%: attributes_type must name the app''s ActivityAttributes type as Swift spells it (ActivityKit''s attributes-type), not %',
            caller, quote_literal(left(attributes_type, 40)) USING ERRCODE = 'check_violation';
    END IF;
    IF activity = '' OR activity ~ '[[:cntrl:]]' OR octet_length(activity) > 256 THEN
        RAISE EXCEPTION '%: activity must be 1 to 256 bytes without control characters', caller
            USING ERRCODE = 'check_violation';
    END IF;
    dev := herald.device_to_register_on(app, device, caller);
    IF dev.platform <> 'ios' THEN
        RAISE EXCEPTION '%: Live Activities are iOS''s, and device % is %', caller, quote_literal(device), dev.platform
            USING ERRCODE = 'check_violation';
    END IF;
    IF dev.disabled_at IS NOT NULL THEN
        RAISE EXCEPTION '%: device % is disabled (%): register it again with herald.register_device first', caller,
            quote_literal(device), dev.disabled_reason USING ERRCODE = 'check_violation';
    END IF;

    IF kind = 'update' THEN
        INSERT INTO herald.live_activities AS a (app_id, activity_id, attributes_type, user_ref, started_by)
        VALUES (app, activity, register_activity_token.attributes_type, dev.user_ref, 'app')
        ON CONFLICT (app_id, activity_id) DO NOTHING;
        SELECT * INTO act FROM herald.live_activities a WHERE a.app_id = app AND a.activity_id = activity FOR UPDATE;
        IF act.attributes_type <> register_activity_token.attributes_type THEN
            RAISE EXCEPTION '%: activity % is a %, not a %', caller, quote_literal(activity), act.attributes_type,
                register_activity_token.attributes_type USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    -- A token is one device's: held by another device of the app, it ends there. (One device's
    -- push-to-start token may be the same for all its activity types.) Two devices registering
    -- one push-to-start token at once cannot both keep it: the unique index
    -- activity_tokens_push_to_start_live makes the later one wait for the first to commit and
    -- then fail, and it tries again, ending the first's (or, when it was this device's own
    -- registration of the same token, finding it unchanged).
    FOR attempt IN 1 .. 3 LOOP
        BEGIN
            IF kind = 'update' THEN
                SELECT * INTO existing FROM herald.activity_tokens t
                WHERE t.live_activity_id = act.id AND t.device_id = dev.id AND t.kind = 'update' AND t.ended_at IS NULL
                FOR UPDATE;
            ELSE
                SELECT * INTO existing FROM herald.activity_tokens t
                WHERE t.device_id = dev.id AND t.attributes_type = register_activity_token.attributes_type
                  AND t.kind = 'push_to_start' AND t.ended_at IS NULL
                FOR UPDATE;
            END IF;
            IF existing.token = hex THEN
                token_row_id := existing.id;
                status := 'unchanged';
                RETURN;
            END IF;
            UPDATE herald.activity_tokens t
            SET ended_at = now(), ended_cause = 'replaced',
                ended_reason = CASE WHEN t.id = existing.id THEN 'the app registered a new token in its place'
                                    ELSE format('registered again by device %s', device) END
            WHERE (t.id = existing.id OR (t.token = hex AND t.device_id <> dev.id)) AND t.ended_at IS NULL
              AND t.app_id = app;
            INSERT INTO herald.activity_tokens AS t (app_id, device_id, kind, attributes_type, live_activity_id, token)
            VALUES (app, dev.id, kind, register_activity_token.attributes_type, act.id, hex)
            RETURNING t.id INTO token_row_id;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            IF attempt = 3 THEN
                RAISE EXCEPTION '%: the token kept being registered by other devices of app % at the same time; try again',
                    caller, quote_literal(app) USING ERRCODE = 'serialization_failure';
            END IF;
        END;
    END LOOP;
    status := 'registered';

    IF kind = 'update' THEN
        -- Catching up: the activity's newest update or end, while it is worth sending.
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, activity_token_id, run_at)
        SELECT n.id, dev.id, 'live_activity', token_row_id, now()
        FROM herald.notifications n
        WHERE n.id = act.last_notification_id AND n.activity_event IN ('update', 'end')
          AND n.state IN ('accepted', 'no_devices') AND n.expires_at > now()
        RETURNING id INTO caught_up;
        IF caught_up IS NOT NULL THEN
            UPDATE herald.notifications n SET state = 'accepted', reason = NULL
            WHERE n.id = act.last_notification_id AND n.state = 'no_devices';
        END IF;
        UPDATE herald.activity_tokens t
        SET last_delivery_id = caught_up,
            ended_at = CASE WHEN act.state = 'ended' THEN now() END,
            ended_cause = CASE WHEN act.state = 'ended' THEN 'activity_ended' END,
            ended_reason = CASE WHEN act.state = 'ended' THEN 'the activity had ended when the token came' END
        WHERE t.id = token_row_id;
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.register_activity_token(text,text,text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.register_activity_token(text,text,text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.register_activity_token(text,text,text,text,text) TO herald_daemon;

-- The app says a token is no longer good: an activity's update token once the activity was
-- dismissed or ended on the device (`activity`), or its push-to-start token for a type
-- (`attributes_type`, the app no longer starts those). Returns how many tokens it ended. Only
-- for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.unregister_activity_token(app text, device text, activity text DEFAULT NULL,
    attributes_type text DEFAULT NULL) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ended int;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.unregister_activity_token');
    IF num_nonnulls(activity, attributes_type) <> 1 THEN
        RAISE EXCEPTION 'herald.unregister_activity_token: name the activity (its update token) or the attributes_type (the push-to-start token), one of them'
            USING ERRCODE = 'check_violation';
    END IF;
    UPDATE herald.activity_tokens t
    SET ended_at = now(), ended_cause = CASE WHEN t.kind = 'update' THEN 'dismissed' ELSE 'unregistered' END,
        ended_reason = CASE WHEN t.kind = 'update' THEN 'the app said the activity was dismissed or ended on the device'
                            ELSE 'the app unregistered it' END
    FROM herald.devices d
    WHERE d.id = t.device_id AND d.app_id = app AND d.device_id = device AND t.ended_at IS NULL
      AND CASE WHEN activity IS NOT NULL
               THEN t.kind = 'update' AND t.live_activity_id = (SELECT a.id FROM herald.live_activities a
                                                              WHERE a.app_id = app AND a.activity_id = activity)
               ELSE t.kind = 'push_to_start' AND t.attributes_type = unregister_activity_token.attributes_type END;
    GET DIAGNOSTICS ended = ROW_COUNT;
    RETURN ended;
END;
$$;
REVOKE ALL ON FUNCTION herald.unregister_activity_token(text,text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.unregister_activity_token(text,text,text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.unregister_activity_token(text,text,text,text) TO herald_daemon;

-- What became of a Live Activity: each of its events and each send, as
-- herald.live_activity_sends shows operators. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.activity_sends(app text, activity text) RETURNS SETOF herald.live_activity_sends
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.activity_sends');
    RETURN QUERY SELECT * FROM herald.live_activity_sends s WHERE s.app_id = app AND s.activity_id = activity
                 ORDER BY s.notification_id, s.delivery_id;
END;
$$;
REVOKE ALL ON FUNCTION herald.activity_sends(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.activity_sends(text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.activity_sends(text,text) TO herald_daemon;

-- An event of a Live Activity, as the three calls below write it: a notification that ingest
-- checks and sends (herald.ingest_activity_events). Returns its id; with an idempotency key
-- already used by this app, the first notification's id, and nothing more is sent.
--
-- Ordered by event_at. Left out, it is the time of the call, or just after the newest event
-- the activity (or channel) has taken or still waits on, when that one is ahead (a producer
-- host whose clock runs ahead gave it): an event the producer did not date is never dropped
-- as older. An end dated before that newest event is refused, since it would be dropped. An
-- event_at more than 12 hours ago is refused too: a Live Activity lasts 8 hours, and 4 more
-- on the Lock Screen, so no device could take it (and 4713 BC made a huge negative
-- aps.timestamp).
CREATE OR REPLACE FUNCTION herald.activity_event(app text, caller text, event text, activity text, channel text,
    user_ref text, device_ids text[], attributes_type text, attributes jsonb, content_state jsonb, title text,
    body text, sound text, stale_at timestamptz, dismiss_at timestamptz, relevance_score double precision,
    urgent boolean, ttl interval, expires_at timestamptz, idempotency_key text, event_at timestamptz) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    notification_id bigint;
    called_at timestamptz := clock_timestamp();
    newest timestamptz;
    dated timestamptz := activity_event.event_at;
BEGIN
    PERFORM herald.check_acts_for(app, caller);
    IF coalesce(activity, channel, '') = '' THEN
        RAISE EXCEPTION '%: name the activity (a broadcast: its channel)', caller USING ERRCODE = 'check_violation';
    END IF;
    IF channel IS NOT NULL AND event IS DISTINCT FROM 'update' AND event IS DISTINCT FROM 'end' THEN
        RAISE EXCEPTION '%: event must be update or end, not %: a broadcast cannot start a Live Activity (start each one, and the app subscribes it to the channel)',
            caller, quote_literal(event) USING ERRCODE = 'check_violation';
    END IF;
    IF dated < called_at - interval '12 hours' THEN
        RAISE EXCEPTION '%: event_at % is more than 12 hours ago: no device still shows an activity that old',
            caller, dated USING ERRCODE = 'check_violation',
            HINT = 'leave event_at out to use the time of the call';
    END IF;
    IF event IN ('update', 'end') THEN
        -- The newest event taken (ingested), or waiting for ingest; one further ahead than
        -- ingest allows will be refused, so it orders nothing.
        SELECT max(e) INTO newest FROM (
            SELECT a.event_at FROM herald.live_activities a
            WHERE channel IS NULL AND a.app_id = app AND a.activity_id = activity
            UNION ALL
            SELECT c.event_at FROM herald.broadcast_channels c
            WHERE channel IS NOT NULL AND c.app_id = app AND c.name = channel AND c.state IN ('creating', 'active')
            UNION ALL
            SELECT n.activity_event_at FROM herald.notifications n
            WHERE n.state = 'received' AND n.app_id = app
              AND (n.activity_id = activity OR n.activity_channel = channel)) AS events(e)
        WHERE e <= called_at + interval '1 minute';
        IF dated IS NULL THEN
            dated := greatest(called_at, newest + interval '1 microsecond');
        ELSIF event = 'end' AND dated < newest THEN
            RAISE EXCEPTION '%: event_at % is before the newest event of %, at %: this end would be dropped as older',
                caller, dated, coalesce(quote_literal(activity), 'channel ' || quote_literal(channel)), newest
                USING ERRCODE = 'check_violation',
                      HINT = 'leave event_at out (the end is then ordered after every event), or give a later one';
        END IF;
    END IF;
    INSERT INTO herald.notifications AS n (
        app_id, idempotency_key, user_ref, device_ids, title, body, sound, priority, ttl, expires_at,
        ios_relevance_score, activity_id, activity_channel, activity_event, activity_attributes_type,
        activity_attributes, activity_content_state, activity_stale_at, activity_dismiss_at, activity_event_at)
    VALUES (
        app, activity_event.idempotency_key, activity_event.user_ref, activity_event.device_ids, activity_event.title,
        activity_event.body, activity_event.sound,
        -- Priority 10 draws on a budget Apple sets per device; 5 does not (docs/producers.md).
        CASE WHEN event = 'start' OR urgent THEN 'high' ELSE 'normal' END,
        activity_event.ttl, activity_event.expires_at, relevance_score, activity, channel, event,
        activity_event.attributes_type, activity_event.attributes, content_state, activity_event.stale_at,
        activity_event.dismiss_at, coalesce(dated, called_at))
    RETURNING n.id INTO notification_id;
    -- Without a row, herald.claim_idempotency_key skipped it: the key was used.
    RETURN coalesce(notification_id, herald.notification_of_key(app, activity_event.idempotency_key));
END;
$$;
REVOKE ALL ON FUNCTION herald.activity_event(text,text,text,text,text,text,text[],text,jsonb,jsonb,text,text,text,timestamp with time zone,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- Starts a Live Activity on a user's iPhones (or the devices named), through their push-to-start
-- tokens for attributes_type: its attributes and first content state, and the alert (a title at
-- least) that announces it. `activity` is the app's id for it, used once. Only for an app the
-- session acts for.
CREATE OR REPLACE FUNCTION herald.start_activity(app text, activity text, attributes_type text, attributes jsonb,
    content_state jsonb, title text, body text DEFAULT NULL, user_ref text DEFAULT NULL,
    device_ids text[] DEFAULT NULL, sound text DEFAULT NULL, stale_at timestamptz DEFAULT NULL,
    relevance_score double precision DEFAULT NULL, ttl interval DEFAULT NULL, expires_at timestamptz DEFAULT NULL,
    idempotency_key text DEFAULT NULL, event_at timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald.activity_event(app, 'herald.start_activity', 'start', activity, NULL, user_ref, device_ids, attributes_type,
                                 attributes, content_state, title, body, sound, stale_at, NULL, relevance_score, true,
                                 ttl, expires_at, idempotency_key, event_at);
$$;
REVOKE ALL ON FUNCTION herald.start_activity(text,text,text,jsonb,jsonb,text,text,text,text[],text,timestamp with time zone,double precision,interval,timestamp with time zone,text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.start_activity(text,text,text,jsonb,jsonb,text,text,text,text[],text,timestamp with time zone,double precision,interval,timestamp with time zone,text,timestamp with time zone) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.start_activity(text,text,text,jsonb,jsonb,text,text,text,text[],text,timestamp with time zone,double precision,interval,timestamp with time zone,text,timestamp with time zone) TO herald_daemon;

-- Updates a Live Activity on every device it runs on: its new content state, and an alert when
-- the change deserves one. At priority 5 unless `urgent`. An update older (by event_at, the
-- time of the call unless given) than one already taken is not sent; a newer one supersedes the
-- older ones still waiting. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.update_activity(app text, activity text, content_state jsonb,
    title text DEFAULT NULL, body text DEFAULT NULL, sound text DEFAULT NULL, stale_at timestamptz DEFAULT NULL,
    relevance_score double precision DEFAULT NULL, urgent boolean DEFAULT false, ttl interval DEFAULT NULL,
    expires_at timestamptz DEFAULT NULL, idempotency_key text DEFAULT NULL, event_at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald.activity_event(app, 'herald.update_activity', 'update', activity, NULL, NULL, NULL, NULL, NULL,
                                 content_state, title, body, sound, stale_at, NULL, relevance_score, urgent, ttl,
                                 expires_at, idempotency_key, event_at);
$$;
REVOKE ALL ON FUNCTION herald.update_activity(text,text,jsonb,text,text,text,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.update_activity(text,text,jsonb,text,text,text,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.update_activity(text,text,jsonb,text,text,text,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_daemon;

-- Ends a Live Activity: its final content state (the newest one when not given), and when the
-- ended activity leaves the Lock Screen (`dismiss_at`: a time in the past removes it at once;
-- Apple keeps it at most four hours). Its update tokens end with it. Ordered and superseding as
-- updates are. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.end_activity(app text, activity text, content_state jsonb DEFAULT NULL,
    dismiss_at timestamptz DEFAULT NULL, title text DEFAULT NULL, body text DEFAULT NULL, sound text DEFAULT NULL,
    urgent boolean DEFAULT false, ttl interval DEFAULT NULL, expires_at timestamptz DEFAULT NULL,
    idempotency_key text DEFAULT NULL, event_at timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald.activity_event(app, 'herald.end_activity', 'end', activity, NULL, NULL, NULL, NULL, NULL, content_state,
                                 title, body, sound, NULL, dismiss_at, NULL, urgent, ttl, expires_at, idempotency_key,
                                 event_at);
$$;
REVOKE ALL ON FUNCTION herald.end_activity(text,text,jsonb,timestamp with time zone,text,text,text,boolean,interval,timestamp with time zone,text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.end_activity(text,text,jsonb,timestamp with time zone,text,text,text,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.end_activity(text,text,jsonb,timestamp with time zone,text,text,text,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_daemon;

-- Broadcast channels (iOS 18; docs/producers.md#broadcast-channels). Creates a channel for the
-- app's Live Activities, or returns the one of that name not deleted: the channels worker makes
-- it at APNs (state creating, then active with APNs' channel_id, which the app subscribes its
-- activities to). `stores_latest`: APNs keeps the most recent message for offline devices (its
-- message storage policy; it cannot change). Sending straight to APNs needs the app's APNs setup,
-- even when its iPhones go through FCM. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.create_channel(app text, channel text, stores_latest boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    row_id bigint;
    existing_policy boolean;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.create_channel');
    IF coalesce(channel, '') = '' OR channel ~ '[[:cntrl:]]' OR octet_length(channel) > 256 THEN
        RAISE EXCEPTION 'herald.create_channel: channel must be 1 to 256 bytes without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM herald.app_apns s WHERE s.app_id = app AND s.bundle_id IS NOT NULL
                   AND (s.key_file IS NOT NULL OR s.certificate_file IS NOT NULL)) THEN
        RAISE EXCEPTION 'herald.create_channel: app % has no APNs setup: channels are made at APNs with the app''s bundle id and APNs key or certificate',
            quote_literal(app) USING ERRCODE = 'check_violation',
            HINT = 'an operator sets bundle_id and key_file, team_id, key_id (or certificate_file) in herald.app_apns';
    END IF;
    INSERT INTO herald.broadcast_channels AS c (app_id, name, stores_latest)
    VALUES (app, channel, coalesce(create_channel.stores_latest, false))
    ON CONFLICT (app_id, name) WHERE state IN ('creating', 'active') DO NOTHING
    RETURNING c.id INTO row_id;
    IF row_id IS NULL THEN
        SELECT c.id, c.stores_latest INTO row_id, existing_policy FROM herald.broadcast_channels c
        WHERE c.app_id = app AND c.name = channel AND c.state IN ('creating', 'active');
        IF existing_policy <> coalesce(create_channel.stores_latest, false) THEN
            RAISE EXCEPTION 'herald.create_channel: channel % exists with stores_latest %, which APNs cannot change: delete it first, or use another name',
                quote_literal(channel), existing_policy USING ERRCODE = 'check_violation';
        END IF;
    ELSE
        INSERT INTO herald.jobs (kind, ref) VALUES ('channels', row_id);
    END IF;
    RETURN row_id;
END;
$$;
REVOKE ALL ON FUNCTION herald.create_channel(text,text,boolean) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.create_channel(text,text,boolean) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.create_channel(text,text,boolean) TO herald_daemon;

-- Deletes a channel at APNs (the channels worker; state deleting, then deleted). Returns false
-- when the app has no such channel. Broadcasts to it are refused from now on. Only for an app
-- the session acts for.
CREATE OR REPLACE FUNCTION herald.delete_channel(app text, channel text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    row_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.delete_channel');
    UPDATE herald.broadcast_channels c
    SET state = CASE WHEN c.channel_id IS NULL THEN 'deleted' ELSE 'deleting' END, changed_at = now(),
        reason = 'deleted by the producer'
    WHERE c.app_id = app AND c.name = channel AND c.state IN ('creating', 'active')
    RETURNING c.id INTO row_id;
    IF row_id IS NULL THEN
        RETURN false;
    END IF;
    -- One not made yet is simply dropped (the worker, finding it deleted, makes nothing).
    INSERT INTO herald.jobs (kind, ref) VALUES ('channels', row_id);
    RETURN true;
END;
$$;
REVOKE ALL ON FUNCTION herald.delete_channel(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.delete_channel(text,text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.delete_channel(text,text) TO herald_daemon;

-- The app's channels: each one's name, APNs' id (what the app subscribes its activities to),
-- state and why. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.channels(app text)
RETURNS TABLE (channel text, channel_id text, state text, stores_latest boolean, reason text, changed_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.channels');
    RETURN QUERY SELECT c.name, c.channel_id, c.state, c.stores_latest, c.reason, c.changed_at
                 FROM herald.broadcast_channels c WHERE c.app_id = app ORDER BY c.name, c.id;
END;
$$;
REVOKE ALL ON FUNCTION herald.channels(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.channels(text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.channels(text) TO herald_daemon;

-- Sends a Live Activity update (or, with event 'end', its end) to every activity subscribed
-- to the channel, in one request to APNs. A broadcast cannot start an activity. Ordered and
-- superseding per channel as an activity's events are per token. Only for an app the session
-- acts for.
CREATE OR REPLACE FUNCTION herald.broadcast_activity(app text, channel text, content_state jsonb,
    event text DEFAULT 'update', title text DEFAULT NULL, body text DEFAULT NULL, sound text DEFAULT NULL,
    stale_at timestamptz DEFAULT NULL, dismiss_at timestamptz DEFAULT NULL,
    relevance_score double precision DEFAULT NULL, urgent boolean DEFAULT false, ttl interval DEFAULT NULL,
    expires_at timestamptz DEFAULT NULL, idempotency_key text DEFAULT NULL, event_at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT herald.activity_event(app, 'herald.broadcast_activity', event, NULL, channel, NULL, NULL, NULL, NULL,
                                 content_state, title, body, sound, stale_at, dismiss_at, relevance_score, urgent, ttl,
                                 expires_at, idempotency_key, event_at);
$$;
REVOKE ALL ON FUNCTION herald.broadcast_activity(text,text,jsonb,text,text,text,text,timestamp with time zone,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.broadcast_activity(text,text,jsonb,text,text,text,text,timestamp with time zone,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.broadcast_activity(text,text,jsonb,text,text,text,text,timestamp with time zone,timestamp with time zone,double precision,boolean,interval,timestamp with time zone,text,timestamp with time zone) TO herald_daemon;

-- Sends a push of one of herald.push_types to a user's devices (or the devices named) that
-- registered a token of that type: `data` (an object of strings; numbers and booleans are
-- converted) at the payload's top level, beside herald_notification_id, for the app's handler
-- (PushKit's dictionaryPayload, the location extension's payload); a widget push carries none.
-- `priority` 'normal' only for location (a periodic query); the others go at once. Without ttl
-- or expires_at, a call is tried for 30 seconds and a talk burst for 10 (at most 2 minutes and
-- 1), the rest for the app's default_ttl. Ingest checks the rest, as for herald.send. Returns
-- the notification's id; with an idempotency key already used by this app, the first one's, and
-- nothing more is sent. Only for an app the session acts for.
CREATE OR REPLACE FUNCTION herald.send_push(app text, push_type text, user_ref text DEFAULT NULL,
    device_ids text[] DEFAULT NULL, data jsonb DEFAULT NULL, priority text DEFAULT NULL, ttl interval DEFAULT NULL,
    expires_at timestamptz DEFAULT NULL, idempotency_key text DEFAULT NULL, send_at timestamptz DEFAULT NULL,
    dry_run boolean DEFAULT false) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    caller constant text := 'herald.send_push';
    type_row herald.push_types;
    notification_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, caller);
    type_row := herald.push_type_named(push_type, caller);
    IF priority = 'normal' AND NOT type_row.may_be_normal THEN
        RAISE EXCEPTION '%: % pushes go at once (priority high): leave priority out', caller, push_type
            USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO herald.notifications AS n (app_id, push_type, idempotency_key, user_ref, device_ids, data, priority,
                                           ttl, expires_at, send_at, dry_run)
    VALUES (app, send_push.push_type, send_push.idempotency_key, send_push.user_ref, send_push.device_ids,
            send_push.data, send_push.priority, send_push.ttl, send_push.expires_at, send_push.send_at,
            coalesce(send_push.dry_run, false))
    RETURNING n.id INTO notification_id;
    -- Without a row, herald.claim_idempotency_key skipped it: the key was used.
    RETURN coalesce(notification_id, herald.notification_of_key(app, send_push.idempotency_key));
END;
$$;
REVOKE ALL ON FUNCTION herald.send_push(text,text,text,text[],jsonb,text,interval,timestamp with time zone,text,timestamp with time zone,boolean) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.send_push(text,text,text,text[],jsonb,text,interval,timestamp with time zone,text,timestamp with time zone,boolean) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.send_push(text,text,text,text[],jsonb,text,interval,timestamp with time zone,text,timestamp with time zone,boolean) TO herald_daemon;

-- The channel a backend LISTENs on to be told of its app's device changes (NOTIFY, with the
-- app's id as payload): another app's producers cannot learn it. Only for an app the session
-- acts for.
--   SELECT herald.device_changes_channel('shop');  -- then LISTEN on the name it returns
CREATE OR REPLACE FUNCTION herald.device_changes_channel(app text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.device_changes_channel');
    RETURN herald.device_changes_channel_of(app);
END;
$$;
REVOKE ALL ON FUNCTION herald.device_changes_channel(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.device_changes_channel(text) TO herald_producer;

-- Where the feed's cursor `after` points (NULL: before the oldest change), checked: the
-- transaction and the change it names.
CREATE OR REPLACE FUNCTION herald.feed_position(after text, caller text, OUT xid xid8, OUT id bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    xid := '0';
    id := 0;
    IF after IS NOT NULL THEN
        IF after !~ '^[0-9]{1,20}[.][0-9]{1,19}$' THEN
            RAISE EXCEPTION '%: % is not a cursor: pass a cursor the feed returned, or NULL', caller,
                quote_literal(left(after, 40)) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        xid := split_part(after, '.', 1)::xid8;
        id := split_part(after, '.', 2)::bigint;
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.feed_position(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- The feed of an app's device changes (herald.device_changes), after the cursor `after` (NULL:
-- from the oldest kept), `max_count` (1 to 1,000) at a time: a backend polls it, passing the
-- last row's `cursor`, or LISTENs on its app's channel (herald.device_changes_channel) and reads
-- it when told. A change is returned once every writing transaction older than its own has ended
-- (on the whole server: transaction ids are the cluster's), in the order of their transactions,
-- so a cursor never passes one that commits late; herald.device_changes_waiting says whether
-- some are held back so. Changes are kept for the retention (HERALD_RETENTION). Only for an app the
-- session acts for.
--   SELECT * FROM herald.changed_devices('shop');
--   SELECT * FROM herald.changed_devices('shop', after => '812345.17');
CREATE OR REPLACE FUNCTION herald.changed_devices(app text, after text DEFAULT NULL, max_count integer DEFAULT 100)
RETURNS TABLE (cursor text, device_id text, change text, reason text, token_hint text, changed_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    after_xid xid8;
    after_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.changed_devices');
    IF max_count IS NULL OR max_count < 1 OR max_count > 1000 THEN
        RAISE EXCEPTION 'herald.changed_devices: max_count must be from 1 to 1000, not %', max_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT p.xid, p.id INTO after_xid, after_id FROM herald.feed_position(after, 'herald.changed_devices') p;
    RETURN QUERY
    SELECT c.xid || '.' || c.id, c.device_id, c.change, c.reason, c.token_hint, c.changed_at
    FROM herald.device_changes c
    WHERE c.app_id = app AND (c.xid, c.id) > (after_xid, after_id) AND c.xid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY c.xid, c.id
    LIMIT max_count;
END;
$$;
REVOKE ALL ON FUNCTION herald.changed_devices(text,text,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.changed_devices(text,text,integer) TO herald_producer;

-- How many of the app's changes after the cursor `after` have committed: once herald.changed_devices
-- returns nothing more, those it holds back behind an older writing transaction still open
-- somewhere on the server. Their NOTIFY came when they committed, when the feed could not return
-- them yet, and none follows: a backend told by NOTIFY reads the feed to its end, and while this
-- is above zero for its last cursor reads it again a moment later, so it misses none. Only for
-- an app the session acts for.
CREATE OR REPLACE FUNCTION herald.device_changes_waiting(app text, after text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    after_xid xid8;
    after_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.device_changes_waiting');
    SELECT p.xid, p.id INTO after_xid, after_id FROM herald.feed_position(after, 'herald.device_changes_waiting') p;
    RETURN (SELECT count(*) FROM herald.device_changes c
            WHERE c.app_id = app AND (c.xid, c.id) > (after_xid, after_id));
END;
$$;
REVOKE ALL ON FUNCTION herald.device_changes_waiting(text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.device_changes_waiting(text,text) TO herald_producer;
