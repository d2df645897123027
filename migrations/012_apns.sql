-- 012: Apple's APNs spoken directly, beside FCM; tokens that say what they are.
--
-- An app chooses how its iOS devices are reached (ios_transport): through FCM, as before, or
-- straight to APNs with the app's own key (.p8, token-based authentication) or certificate
-- (certificate-based). A device's token says what it is (token_kind), and that decides how it
-- is sent: an APNs device token straight to APNs, an FCM registration token or Firebase
-- Installation ID through FCM, a browser's subscription through its push service. So an app
-- that moves its iOS devices to APNs keeps reaching those that have not registered their
-- APNs token yet, through FCM.
--
--   UPDATE herald.apps SET ios_transport = 'apns', apns_bundle_id = 'com.example.shop',
--          apns_team_id = 'ABCDE12345', apns_key_id = 'KEY1234567', apns_key_file = '/etc/herald/AuthKey.p8'
--   WHERE app_id = 'shop';
--   SELECT * FROM herald.register_device('shop', 'iphone-1', 'ios', '<64 hex digits>', 'user-42');
--   SELECT * FROM herald.register_device('shop', 'pixel-1', 'android', '<FID>', 'user-42', token_kind => 'installation_id');

ALTER TABLE herald.apps
    -- How iOS devices registered without a token kind are reached: 'fcm' or 'apns'.
    ADD COLUMN ios_transport text NOT NULL DEFAULT 'fcm' CHECK (ios_transport IN ('fcm', 'apns')),
    -- api.push.apple.com ('production') or api.sandbox.push.apple.com ('development').
    ADD COLUMN apns_environment text NOT NULL DEFAULT 'production'
        CHECK (apns_environment IN ('production', 'development')),
    -- The app's bundle id: the apns-topic.
    ADD COLUMN apns_bundle_id text,
    -- Token-based authentication: the team, the key's id and the .p8 file (PEM).
    ADD COLUMN apns_team_id text,
    ADD COLUMN apns_key_id text,
    ADD COLUMN apns_key_file text,
    -- Certificate-based authentication: a PEM file holding the certificate and its key, or a
    -- .p12 bundle without a password.
    ADD COLUMN apns_certificate_file text,
    -- When that certificate expires, as the daemon read it when it loaded the file.
    ADD COLUMN apns_certificate_expires_at timestamptz,
    ADD CONSTRAINT "direct APNs needs a bundle id and a key or a certificate"
        CHECK (ios_transport = 'fcm' OR (apns_bundle_id IS NOT NULL AND (
                   (apns_key_file IS NOT NULL AND apns_team_id IS NOT NULL AND apns_key_id IS NOT NULL)
                   OR apns_certificate_file IS NOT NULL)));

ALTER TABLE herald.devices
    ADD COLUMN token_kind text NOT NULL DEFAULT 'registration_token'
        CHECK (token_kind IN ('registration_token', 'installation_id', 'apns_device_token', 'web_subscription'));
UPDATE herald.devices SET token_kind = 'web_subscription' WHERE platform = 'web';

ALTER TABLE herald.deliveries
    -- APNs' apns-unique-id (its development environment gives one): the key to the delivery
    -- log in Apple's Push Notifications Console.
    ADD COLUMN provider_unique_id text;

ALTER TABLE herald.app_config_problems DROP CONSTRAINT app_config_problems_scope_check;
ALTER TABLE herald.app_config_problems
    ADD CONSTRAINT app_config_problems_scope_check CHECK (scope IN ('fcm', 'fcm_apns', 'web', 'apns'));

-- Configuration problems, and certificates about to expire: Apple's push certificates last a
-- year, and an expired one fails every send, so the warning starts 30 days ahead.
CREATE OR REPLACE VIEW herald.app_problems AS
SELECT p.app_id, a.fcm_project_id, p.problem AS config_error, p.since AS config_error_at, p.scope, p.failed_at,
       CASE p.scope WHEN 'fcm' THEN 'every delivery through FCM'
                    WHEN 'fcm_apns' THEN 'iOS deliveries through FCM'
                    WHEN 'web' THEN 'deliveries to browsers'
                    WHEN 'apns' THEN 'iOS deliveries straight to APNs' END AS waiting
FROM herald.app_config_problems p
JOIN herald.apps a ON a.app_id = p.app_id
UNION ALL
SELECT a.app_id, a.fcm_project_id,
       CASE WHEN a.apns_certificate_expires_at <= now()
            THEN format('the APNs certificate %s expired at %s: every send to APNs fails until it is renewed',
                        a.apns_certificate_file, a.apns_certificate_expires_at)
            ELSE format('the APNs certificate %s expires at %s, in %s days: renew it',
                        a.apns_certificate_file, a.apns_certificate_expires_at,
                        ceil(extract(epoch FROM a.apns_certificate_expires_at - now()) / 86400))
       END,
       a.apns_certificate_expires_at - interval '30 days', 'apns_certificate', NULL,
       'nothing yet'
FROM herald.apps a
WHERE a.apns_certificate_file IS NOT NULL AND a.apns_certificate_expires_at < now() + interval '30 days';

-- 011's registration, with the token's kind: said, or decided by the platform and the app.
DROP FUNCTION herald.register_device(text, text, text, text, text);
CREATE FUNCTION herald.register_device(
    app text, device text, platform text, push_token text, user_ref text DEFAULT NULL, token_kind text DEFAULT NULL,
    OUT device_row_id bigint, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    existing herald.devices;
    -- What the device row keeps: the token, or for a browser its endpoint and keys.
    token text := push_token;
    p256dh bytea;
    auth bytea;
    kind text := token_kind;
    transport text;
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
    SELECT a.ios_transport INTO transport FROM herald.apps a WHERE a.app_id = app;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.register_device: unknown app %; add it to herald.apps first', quote_literal(app)
            USING ERRCODE = 'foreign_key_violation';
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
$$;
REVOKE ALL ON FUNCTION herald.register_device(text, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.register_device(text, text, text, text, text, text) TO herald_producer;

-- 011's claim, with the token's kind and the app's APNs setup; a delivery to an APNs device
-- token waits on the app's APNs problems, not on FCM's.
DROP FUNCTION herald.claim_deliveries(timestamptz, int, text, interval);
CREATE FUNCTION herald.claim_deliveries(at timestamptz, batch int, worker text, lease interval)
RETURNS TABLE (delivery_id bigint, notification_id bigint, payload_kind text, attempts int, abandoned_by text,
               device_id bigint, push_token text, token_kind text, device_disabled_reason text,
               web_p256dh bytea, web_auth bytea,
               app_id text, fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text,
               apns_environment text, apns_bundle_id text, apns_team_id text, apns_key_id text, apns_key_file text,
               apns_certificate_file text, config_error_at timestamptz,
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
REVOKE ALL ON FUNCTION herald.claim_deliveries(timestamptz, int, text, interval) FROM PUBLIC;
