-- 015: hostile input fails only itself.
--
-- Every value a producer or a device gives may be hostile. This migration closes the ways one
-- of them could fail more than itself:
--
-- * Producers act only for the apps granted to them. A row in herald.producer_apps names a
--   role and an app; a login acts for the apps granted to any role it is a member of. Every
--   producer function checks it, and row-level security checks a plain INSERT. Roles that are
--   not producers (the daemon, the schema's owner, superusers) are not confined. Apps that
--   existed before this migration are granted to herald_producer itself, so every producer
--   keeps the access it had; replace that row with a grant per login.
-- * Herald's own columns of herald.notifications (state, reason, origin, created_at,
--   ingested_at) are not the producer's to write: the producer's INSERT right covers the
--   content columns only. Idempotency keys that start with herald- are Herald's own.
-- * Ingest range-checks what a producer gives: finite times, send_at at most a year ahead,
--   expires_at at most 28 days after the send, a collapse key APNs takes, an FCM topic name,
--   no control characters in the fields that become identifiers or headers, and the iOS
--   fields in the payload's size.
-- * A browser's subscription is checked at registration: an endpoint that is a plain https
--   URL on a push service the app allows (herald.apps.web_push_hosts; by default the push
--   services of Chrome, Firefox, Safari and Edge), never a private, loopback or link-local
--   address unless herald.apps.web_push_private_addresses says so, and a p256dh that is a
--   point on P-256.

-- Which roles may act for which apps. An operator grants:
--     INSERT INTO herald.producer_apps (producer, app_id) VALUES ('shop_backend', 'shop');
CREATE TABLE herald.producer_apps (
    producer regrole NOT NULL,
    app_id text NOT NULL REFERENCES herald.apps ON UPDATE CASCADE ON DELETE CASCADE,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (producer, app_id)
);
INSERT INTO herald.producer_apps (producer, app_id) SELECT 'herald_producer'::regrole, app_id FROM herald.apps;

-- Whether this session may act for the app. session_user, because inside a SECURITY DEFINER
-- function current_user is the function's owner.
CREATE FUNCTION herald.acts_for(app text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT NOT pg_has_role(session_user, 'herald_producer', 'MEMBER')
        OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = session_user)
        OR EXISTS (SELECT 1 FROM herald.producer_apps g
                   WHERE g.app_id = app AND pg_has_role(session_user, g.producer, 'MEMBER'));
$$;

-- The apps this session acts for as a producer, for row-level security: one call per
-- statement (an InitPlan), not one per row.
CREATE FUNCTION herald.producer_app_ids() RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(DISTINCT g.app_id), '{}')
    FROM herald.producer_apps g
    WHERE pg_has_role(session_user, g.producer, 'MEMBER');
$$;

-- Refuses, with what to do, a session that may not act for the app. The same words for an
-- app that does not exist: a producer learns nothing of other apps.
CREATE FUNCTION herald.check_acts_for(app text, caller text) RETURNS void
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

-- A producer writes the content of a notification, never Herald's own columns, and reads back
-- only what it needs (the id for RETURNING, the idempotency key for ON CONFLICT, and what became
-- of it), for its own apps.
REVOKE INSERT ON herald.notifications FROM herald_producer;
GRANT INSERT (app_id, idempotency_key, user_ref, device_ids, topic, title, body, data, image_url, sound, badge,
              android_channel_id, ios_category, ios_thread_id, deep_link, priority, ttl, expires_at, collapse_key,
              send_at, silent, dry_run)
    ON herald.notifications TO herald_producer;
GRANT SELECT (id, app_id, idempotency_key, state, reason) ON herald.notifications TO herald_producer;
ALTER TABLE herald.notifications ENABLE ROW LEVEL SECURITY;
-- Everyone else keeps what their privileges allow; producers are narrowed to their apps.
CREATE POLICY "as privileges allow" ON herald.notifications USING (true) WITH CHECK (true);
CREATE POLICY "only apps granted in herald.producer_apps" ON herald.notifications AS RESTRICTIVE
    FOR INSERT TO herald_producer WITH CHECK (app_id = ANY ((SELECT herald.producer_app_ids())::text[]));
CREATE POLICY "producers read their apps' rows only" ON herald.notifications AS RESTRICTIVE
    FOR SELECT TO herald_producer USING (app_id = ANY ((SELECT herald.producer_app_ids())::text[]));

-- Herald's wake-ups use herald-wakeup-<id>; a producer's key there would make reconcile fail.
-- NOT VALID: rows from before are left as they are, except those still waiting for ingest,
-- whose update by ingest the constraint would refuse: they are rejected here, with the reason.
UPDATE herald.notifications
SET state = 'rejected', ingested_at = now(),
    reason = 'idempotency keys starting with herald- are Herald''s own: send it again with another key'
WHERE state = 'received' AND origin = 'producer' AND idempotency_key LIKE 'herald-%';
ALTER TABLE herald.notifications ADD CONSTRAINT "idempotency keys starting with herald- are Herald's own"
    CHECK (origin <> 'producer' OR idempotency_key NOT LIKE 'herald-%') NOT VALID;

-- The longest a provider keeps a notification (FCM's android.ttl), and the furthest ahead a
-- notification may be scheduled.
CREATE FUNCTION herald.max_ttl() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '28 days' $$;
CREATE FUNCTION herald.max_schedule() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '1 year' $$;

-- Where an app's browsers may be sent. A subscription's endpoint is a URL chosen by whoever
-- registers a browser, and Herald POSTs to it: by default only the push services browsers use.
-- Whether every element is a host pattern: a host name, *.domain, *, or a bracketed IPv6 address.
CREATE FUNCTION herald.are_host_patterns(patterns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_ndims(patterns) = 1
       AND NOT EXISTS (SELECT 1 FROM unnest(patterns) AS p(pattern)
                       WHERE p.pattern IS NULL
                          OR p.pattern !~ '^(\*|(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])$');
$$;

ALTER TABLE herald.apps
    ADD COLUMN web_push_hosts text[]
        CONSTRAINT "web_push_hosts lists host names, *.domain or *"
        CHECK (cardinality(web_push_hosts) = 0 OR herald.are_host_patterns(web_push_hosts)),
    ADD COLUMN web_push_private_addresses boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN herald.apps.web_push_hosts IS
    'push service hosts the app''s browsers may name: host, *.domain or *; NULL: herald.default_web_push_hosts()';
COMMENT ON COLUMN herald.apps.web_push_private_addresses IS
    'whether endpoints may be loopback, private or link-local addresses (a local emulator); checked again on connect';

-- The push services of Chrome and other Chromium browsers (FCM), Firefox (Mozilla's autopush),
-- Safari (Apple) and Edge (Windows Push Notification Services).
CREATE FUNCTION herald.default_web_push_hosts() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['fcm.googleapis.com', '*.push.services.mozilla.com', '*.push.apple.com', '*.notify.windows.com']
$$;

-- Whether a host matches one of the patterns: the host itself, *.domain (any name under the
-- domain, not the domain), or * (anything).
CREATE FUNCTION herald.web_push_host_allowed(host text, patterns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(patterns) AS p(pattern)
                   WHERE p.pattern = '*' OR lower(p.pattern) = lower(host)
                      OR (p.pattern LIKE '*.%' AND length(host) > length(p.pattern) - 1
                          AND lower(right(host, length(p.pattern) - 1)) = lower(substr(p.pattern, 2))));
$$;

-- Whether a URL's host is a loopback, private or link-local address written as such (a name
-- that resolves to one is refused when the daemon connects).
CREATE FUNCTION herald.is_private_host(host text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    address inet;
BEGIN
    IF lower(host) = 'localhost' OR lower(host) LIKE '%.localhost' THEN RETURN true; END IF;
    BEGIN
        address := btrim(host, '[]')::inet;
    EXCEPTION WHEN invalid_text_representation THEN
        RETURN false;  -- a name
    END;
    RETURN address <<= ANY ('{0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12,
                             192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4, ::/128, ::1/128,
                             ::ffff:0.0.0.0/96, 64:ff9b::/96, 100::/64, 2002::/16, fc00::/7, fe80::/10,
                             ff00::/8}'::inet[]);
END;
$$;

-- Whether 65 bytes are an uncompressed point on P-256 (y² = x³ − 3x + b mod p), as a browser's
-- p256dh must be. ECDH with a point off the curve fails, and only that device can fix it.
CREATE FUNCTION herald.is_p256_point(point bytea) RETURNS boolean
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

-- Refuses a browser's endpoint that the app's policy does not allow, saying why.
CREATE FUNCTION herald.check_web_push_endpoint(endpoint text, app herald.apps) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    host text := substring(endpoint FROM '^https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/|$)');
BEGIN
    -- A host whose last label is a number, or that starts with 0x (127.1, 2130706433,
    -- 0x7f000001), is an address in one of the shorthands resolvers accept: only an address
    -- written as four decimal numbers is taken.
    IF host IS NULL OR octet_length(endpoint) > 2048 OR endpoint ~ '[[:space:][:cntrl:]]'
       OR ((host ~ '(^|\.)[0-9]+$' OR host ~* '^0x')
           AND host !~ '^(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}$') THEN
        RAISE EXCEPTION 'herald.register_device: a web subscription''s endpoint must be a plain https:// URL of at most 2048 bytes (a host name, an optional port, a path without spaces or control characters), not %',
            quote_literal(left(endpoint, 40)) USING ERRCODE = 'check_violation';
    END IF;
    IF NOT herald.web_push_host_allowed(host, coalesce(app.web_push_hosts, herald.default_web_push_hosts())) THEN
        RAISE EXCEPTION 'herald.register_device: % is not a push service app % sends to', quote_literal(host), quote_literal(app.app_id)
            USING ERRCODE = 'check_violation',
                  HINT = 'herald.apps.web_push_hosts lists the hosts allowed (NULL: herald.default_web_push_hosts())';
    END IF;
    IF NOT app.web_push_private_addresses AND herald.is_private_host(host) THEN
        RAISE EXCEPTION 'herald.register_device: % is a loopback, private or link-local address', quote_literal(host)
            USING ERRCODE = 'check_violation',
                  HINT = 'only for a local push service: set herald.apps.web_push_private_addresses';
    END IF;
END;
$$;

-- The browser's keys: p256dh must be on the curve.
CREATE OR REPLACE FUNCTION herald.web_subscription(subscription text, OUT endpoint text, OUT p256dh bytea, OUT auth bytea)
    RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

CREATE OR REPLACE FUNCTION herald.send(app text, user_ref text DEFAULT NULL::text, device_ids text[] DEFAULT NULL::text[], topic text DEFAULT NULL::text, title text DEFAULT NULL::text, body text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb, image_url text DEFAULT NULL::text, sound text DEFAULT NULL::text, badge integer DEFAULT NULL::integer, android_channel_id text DEFAULT NULL::text, ios_category text DEFAULT NULL::text, ios_thread_id text DEFAULT NULL::text, deep_link text DEFAULT NULL::text, idempotency_key text DEFAULT NULL::text, priority text DEFAULT NULL::text, ttl interval DEFAULT NULL::interval, expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, collapse_key text DEFAULT NULL::text, send_at timestamp with time zone DEFAULT NULL::timestamp with time zone, silent boolean DEFAULT false, dry_run boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    notification_id bigint;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.send');
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


--
-- Name: stringify_data(jsonb); Type: FUNCTION; Schema: herald; Owner: -
--

CREATE OR REPLACE FUNCTION herald.unregister_device(app text, device text, reason text DEFAULT 'logged out'::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.unregister_device');
    UPDATE herald.devices d
    SET disabled_at = coalesce(d.disabled_at, now()), disabled_cause = 'logout', disabled_reason = reason
    WHERE d.app_id = app AND d.device_id = device;
    RETURN FOUND;
END;
$$;

CREATE OR REPLACE FUNCTION herald.register_device(app text, device text, platform text, push_token text, user_ref text DEFAULT NULL::text, token_kind text DEFAULT NULL::text, OUT device_row_id bigint, OUT status text) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    existing herald.devices;
    -- What the device row keeps: the token, or for a browser its endpoint and keys.
    token text := push_token;
    p256dh bytea;
    auth bytea;
    kind text := token_kind;
    transport text;
    app_row herald.apps;
BEGIN
    PERFORM herald.check_acts_for(app, 'herald.register_device');
    IF platform NOT IN ('android', 'ios', 'web') THEN
        RAISE EXCEPTION 'herald.register_device: platform must be ''android'', ''ios'' or ''web'', not %',
            quote_literal(platform) USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(push_token, '') = '' THEN
        RAISE EXCEPTION 'herald.register_device: push_token is empty' USING ERRCODE = 'check_violation';
    END IF;
    IF coalesce(device, '') = '' OR device ~ '[[:cntrl:]]' OR octet_length(device) > 256 THEN
        RAISE EXCEPTION 'herald.register_device: device must be 1 to 256 bytes without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    IF octet_length(push_token) > 8192 OR (platform <> 'web' AND push_token ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'herald.register_device: push_token must be the token as the platform gave it: at most 8192 bytes, without control characters'
            USING ERRCODE = 'check_violation';
    END IF;
    IF platform = 'web' THEN
        SELECT s.endpoint, s.p256dh, s.auth INTO token, p256dh, auth FROM herald.web_subscription(push_token) AS s;
    END IF;
    SELECT * INTO app_row FROM herald.apps a WHERE a.app_id = app;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.register_device: unknown app %; add it to herald.apps first', quote_literal(app)
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    transport := app_row.ios_transport;
    IF platform = 'web' THEN
        PERFORM herald.check_web_push_endpoint(token, app_row);
    END IF;
    -- What the token is decides how it is sent. Unsaid: a browser's subscription; for iOS, an
    -- APNs device token when the app sends to APNs directly; otherwise an FCM registration token.
    kind := coalesce(kind, CASE WHEN platform = 'web' THEN 'web_subscription'
                                WHEN platform = 'ios' AND transport = 'apns' THEN 'apns_device_token'
                                ELSE 'registration_token' END);
    IF kind NOT IN ('registration_token', 'installation_id', 'apns_device_token', 'web_subscription') THEN
        RAISE EXCEPTION 'herald.register_device: token_kind must be ''registration_token'', ''installation_id'' (FCM), ''apns_device_token'' or ''web_subscription'', not %',
            quote_literal(kind) USING ERRCODE = 'check_violation';
    END IF;
    IF (platform = 'web') <> (kind = 'web_subscription') OR (kind = 'apns_device_token' AND platform <> 'ios') THEN
        RAISE EXCEPTION 'herald.register_device: a token of kind % cannot belong to a device of platform %', kind, platform
            USING ERRCODE = 'check_violation';
    END IF;
    IF kind = 'apns_device_token' AND (push_token !~ '^[0-9A-Fa-f]{64,}$' OR length(push_token) % 2 <> 0) THEN
        RAISE EXCEPTION 'herald.register_device: an APNs device token is 64 or more hexadecimal digits (the app''s deviceToken as hex), not % characters like %',
            length(push_token), quote_literal(left(push_token, 8) || '…') USING ERRCODE = 'check_violation';
    ELSIF kind = 'apns_device_token' THEN
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
            registered_at = now(), web_p256dh = p256dh, web_auth = auth, token_kind = kind
        WHERE d.id = existing.id;
        status := 'token_invalid';
        RETURN;
    END IF;
    UPDATE herald.devices d
    SET platform = register_device.platform, push_token = token,
        user_ref = register_device.user_ref, registered_at = now(), web_p256dh = p256dh, web_auth = auth,
        token_kind = kind,
        disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    WHERE d.id = existing.id;
    status := CASE WHEN existing.disabled_at IS NULL THEN 'registered' ELSE 're-enabled' END;
END;
$_$;


--
-- Name: report_delivery(text, text, text); Type: FUNCTION; Schema: herald; Owner: -
--

CREATE OR REPLACE FUNCTION herald.report_delivery(reference text, kind text DEFAULT 'delivered'::text, device text DEFAULT NULL::text, OUT accepted boolean, OUT outcome text, OUT message text) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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


--
-- Name: send(text, text, text[], text, text, text, jsonb, text, text, integer, text, text, text, text, text, text, interval, timestamp with time zone, text, timestamp with time zone, boolean, boolean); Type: FUNCTION; Schema: herald; Owner: -
--

CREATE OR REPLACE FUNCTION herald.pending_notifications(reference text, since timestamp with time zone DEFAULT (now() - '3 days'::interval), max_count integer DEFAULT 20, device text DEFAULT NULL::text) RETURNS TABLE(notification_id bigint, report_reference text, title text, body text, data jsonb, image_url text, deep_link text, sent_at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    opened record;
BEGIN
    opened := herald.open_reference(reference);
    IF opened.device_id IS NULL OR NOT EXISTS (SELECT 1 FROM herald.devices dev
                                               WHERE dev.id = opened.device_id AND herald.acts_for(dev.app_id)) THEN
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


--

CREATE OR REPLACE FUNCTION herald.redrive(job_ids bigint[] DEFAULT NULL::bigint[], kind text DEFAULT NULL::text, since timestamp with time zone DEFAULT NULL::timestamp with time zone, note text DEFAULT NULL::text, delivery_ids bigint[] DEFAULT NULL::bigint[]) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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


--
-- Name: register_device(text, text, text, text, text, text); Type: FUNCTION; Schema: herald; Owner: -
--

-- A configuration problem nothing waits on any more is cleared, so herald.app_problems and
-- herald status stop reporting it. While deliveries wait, a probe confirms failed_at every
-- minute; one unconfirmed for five minutes is checked against the queued deliveries that
-- need that configuration (rare, so the scan is rare). Returns how many were cleared.
CREATE FUNCTION herald.clear_idle_config_problems(at timestamptz) RETURNS int
LANGUAGE sql AS $$
    WITH cleared AS (
        DELETE FROM herald.app_config_problems p
        WHERE p.failed_at < at - interval '5 minutes'
          AND NOT EXISTS (
              SELECT 1
              FROM herald.deliveries d
              JOIN herald.notifications n ON n.id = d.notification_id
              LEFT JOIN herald.devices dev ON dev.id = d.device_id
              WHERE d.state = 'queued' AND n.app_id = p.app_id
                AND CASE p.scope
                        WHEN 'web' THEN d.payload_kind = 'web'
                        WHEN 'apns' THEN dev.token_kind = 'apns_device_token' AND d.payload_kind LIKE 'ios%'
                        WHEN 'fcm_apns' THEN d.payload_kind LIKE 'ios%' AND dev.token_kind IS DISTINCT FROM 'apns_device_token'
                        ELSE d.payload_kind <> 'web' AND dev.token_kind IS DISTINCT FROM 'apns_device_token'
                    END)
        RETURNING 1
    )
    SELECT count(*)::int FROM cleared;
$$;

CREATE OR REPLACE FUNCTION herald.ingest(ids bigint[], at timestamp with time zone DEFAULT now()) RETURNS TABLE(accepted integer, rejected integer, expired integer, no_devices integer, deliveries integer)
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Lock the batch in id order, so concurrent ingesters cannot deadlock.
    PERFORM 1 FROM herald.notifications n WHERE n.id = ANY(ids) AND n.state = 'received' ORDER BY n.id FOR UPDATE;

    RETURN QUERY
    WITH normalized AS MATERIALIZED (
        SELECT n.id, n.app_id, n.user_ref, n.device_ids, n.topic, n.silent,
               -- The app's defaults; a ttl becomes the absolute expires_at it implies.
               coalesce(n.priority, a.default_priority) AS priority,
               -- least(): created_at is Herald's, but a restored or hand-written row must not overflow.
               coalesce(n.expires_at, least(n.created_at, at) + coalesce(n.ttl, a.default_ttl)) AS expires_at,
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
                   WHEN NOT isfinite(n.expires_at) OR NOT isfinite(n.send_at) THEN
                       format('%s must be a finite time, not %s', CASE WHEN NOT isfinite(n.expires_at) THEN 'expires_at' ELSE 'send_at' END,
                              CASE WHEN NOT isfinite(n.expires_at) THEN n.expires_at ELSE n.send_at END)
                   WHEN n.send_at > at + herald.max_schedule() THEN
                       format('send_at %s is more than %s ahead; schedule it nearer', n.send_at, herald.max_schedule())
                   WHEN n.expires_at > greatest(at, coalesce(n.send_at, at)) + herald.max_ttl() THEN
                       format('expires_at %s is more than %s after the notification is sent (%s), the longest FCM keeps a message; give an earlier expires_at or a ttl',
                              n.expires_at, herald.max_ttl(), greatest(at, coalesce(n.send_at, at)))
                   WHEN n.collapse_key ~ '[[:cntrl:]]' OR octet_length(n.collapse_key) > 64 THEN
                       'collapse_key must be at most 64 bytes (APNs'' limit for apns-collapse-id) without control characters'
                   WHEN n.topic !~ '^[A-Za-z0-9_.~%-]+$' OR length(n.topic) > 900 THEN
                       format('topic %s is not an FCM topic name: 1 to 900 of the letters, digits and - _ . ~ %%', quote_literal(left(n.topic, 40)))
                   WHEN concat(n.sound, n.android_channel_id, n.ios_category, n.ios_thread_id, n.image_url, n.deep_link,
                               n.idempotency_key) ~ '[[:cntrl:]]' THEN
                       format('%s contains a control character; remove it',
                              CASE WHEN n.sound ~ '[[:cntrl:]]' THEN 'sound'
                                   WHEN n.android_channel_id ~ '[[:cntrl:]]' THEN 'android_channel_id'
                                   WHEN n.ios_category ~ '[[:cntrl:]]' THEN 'ios_category'
                                   WHEN n.ios_thread_id ~ '[[:cntrl:]]' THEN 'ios_thread_id'
                                   WHEN n.image_url ~ '[[:cntrl:]]' THEN 'image_url'
                                   WHEN n.deep_link ~ '[[:cntrl:]]' THEN 'deep_link'
                                   ELSE 'idempotency_key' END)
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
                       format('payload is about %s bytes once encoded, %s over the %s-byte limit of FCM and APNs; shorten the title, body, data or iOS fields',
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
                           'sound', n.sound, 'channel_id', n.android_channel_id,
                           -- iOS's own fields: in the estimate too, since APNs counts them.
                           'category', n.ios_category, 'thread-id', n.ios_thread_id)))::text)
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


--
-- Name: ingest_next(integer, timestamp with time zone); Type: FUNCTION; Schema: herald; Owner: -
--

DROP FUNCTION herald.claim_deliveries(timestamptz, int, text, interval);
CREATE FUNCTION herald.claim_deliveries(at timestamp with time zone, batch integer, worker text, lease interval) RETURNS TABLE(delivery_id bigint, notification_id bigint, payload_kind text, attempts integer, abandoned_by text, device_id bigint, push_token text, token_kind text, device_disabled_reason text, web_p256dh bytea, web_auth bytea, app_id text, fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text, apns_environment text, apns_bundle_id text, apns_team_id text, apns_key_id text, apns_key_file text, apns_certificate_file text, web_push_hosts text[], web_push_private_addresses boolean, config_error_at timestamp with time zone, topic text, title text, body text, data text, image_url text, sound text, badge integer, android_channel_id text, ios_category text, ios_thread_id text, deep_link text, priority text, expires_at timestamp with time zone, collapse_key text, silent boolean, dry_run boolean)
    LANGUAGE sql
    SET enable_sort TO 'off'
    AS $$
    WITH picked AS (
        SELECT d.id, d.locked_by AS abandoned_by
        FROM herald.deliveries d
        WHERE d.state = 'queued' AND d.run_at <= at
        ORDER BY d.run_at, d.id
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), problems AS (
        -- Each app's failing configurations, once per claim (there are usually none), rather
        -- than a lookup per delivery (6 µs a delivery, measured).
        SELECT p.app_id,
               max(p.failed_at) FILTER (WHERE p.scope = 'fcm') AS fcm,
               max(p.failed_at) FILTER (WHERE p.scope = 'fcm_apns') AS fcm_apns,
               max(p.failed_at) FILTER (WHERE p.scope = 'apns') AS apns,
               max(p.failed_at) FILTER (WHERE p.scope = 'web') AS web
        FROM herald.app_config_problems p
        GROUP BY p.app_id
    ), claimed AS (
        UPDATE herald.deliveries AS d
        SET run_at = at + lease, locked_by = worker, attempts = d.attempts + 1
        FROM picked
        WHERE d.id = ANY(ARRAY(SELECT id FROM picked)) AND d.id = picked.id
        RETURNING d.id, d.notification_id, d.device_id, d.payload_kind, d.attempts, picked.abandoned_by
    )
    SELECT c.id, c.notification_id, c.payload_kind, c.attempts, c.abandoned_by,
           c.device_id, dev.push_token, dev.token_kind,
           CASE WHEN dev.disabled_at IS NOT NULL THEN coalesce(dev.disabled_reason, 'disabled') END,
           dev.web_p256dh, dev.web_auth,
           n.app_id, a.fcm_project_id, a.credentials_file, a.vapid_key_file, a.vapid_subject,
           a.apns_environment, a.apns_bundle_id, a.apns_team_id, a.apns_key_id, a.apns_key_file,
           a.apns_certificate_file,
           -- A browser's route only: the hosts it may name, and whether they may be private.
           CASE WHEN c.payload_kind = 'web' THEN coalesce(a.web_push_hosts, herald.default_web_push_hosts()) END,
           a.web_push_private_addresses,
           CASE WHEN c.payload_kind = 'web' THEN p.web
                WHEN dev.token_kind = 'apns_device_token' THEN p.apns
                WHEN c.payload_kind LIKE 'ios%' THEN greatest(p.fcm, p.fcm_apns)
                ELSE p.fcm END,
           n.topic, n.title, n.body, n.data::text, n.image_url, n.sound, n.badge,
           n.android_channel_id, n.ios_category, n.ios_thread_id, n.deep_link,
           n.priority, n.expires_at, n.collapse_key, n.silent, n.dry_run
    FROM claimed c
    JOIN herald.notifications n ON n.id = c.notification_id
    JOIN herald.apps a ON a.app_id = n.app_id
    LEFT JOIN herald.devices dev ON dev.id = c.device_id
    LEFT JOIN problems p ON p.app_id = n.app_id;
$$;


--
-- Name: delivery_reference(bigint, bigint); Type: FUNCTION; Schema: herald; Owner: -

REVOKE ALL ON FUNCTION herald.claim_deliveries(timestamptz, int, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.claim_deliveries(timestamptz, int, text, interval) TO herald_daemon;

-- Functions are not executable by everyone (migration 003); the producer runs the checks that
-- its functions and its row-level security call.
REVOKE ALL ON FUNCTION herald.acts_for(text), herald.producer_app_ids(), herald.are_host_patterns(text[]),
    herald.check_acts_for(text, text), herald.max_ttl(),
    herald.max_schedule(), herald.default_web_push_hosts(), herald.web_push_host_allowed(text, text[]),
    herald.is_private_host(text), herald.is_p256_point(bytea), herald.check_web_push_endpoint(text, herald.apps),
    herald.clear_idle_config_problems(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.acts_for(text), herald.producer_app_ids() TO herald_producer;

-- Operators add and configure apps and grant them to producers.
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.apps TO herald_operator;
GRANT SELECT, INSERT, DELETE ON herald.producer_apps TO herald_operator;
-- (are_host_patterns: the apps table's CHECK runs it as whoever writes the row.)
GRANT EXECUTE ON FUNCTION herald.default_web_push_hosts(), herald.are_host_patterns(text[]) TO herald_operator;
