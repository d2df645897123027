-- apps: an app's settings, and what they allow. Where an app's browsers may be sent: a
-- subscription's endpoint is a URL chosen by whoever registers a browser, and Herald POSTs to
-- it, so by default only to the push services browsers use (herald.app_webpush.hosts,
-- private_addresses). The CHECK on hosts calls herald.are_host_patterns. Then the trigger of
-- every provider's settings table.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Whether every element is a host pattern: a host name, *.domain, *, or a bracketed IPv6 address.
CREATE OR REPLACE FUNCTION herald.are_host_patterns(patterns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT array_ndims(patterns) = 1
       AND NOT EXISTS (SELECT 1 FROM unnest(patterns) AS p(pattern)
                       WHERE p.pattern IS NULL
                          OR p.pattern !~ '^(\*|(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])$');
$$;
REVOKE ALL ON FUNCTION herald.are_host_patterns(text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.are_host_patterns(text[]) TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.are_host_patterns(text[]) TO herald_operator;

-- The push services of Chrome and other Chromium browsers (FCM), Firefox (Mozilla's autopush),
-- Safari (Apple) and Edge (Windows Push Notification Services).
CREATE OR REPLACE FUNCTION herald.default_web_push_hosts() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['fcm.googleapis.com', '*.push.services.mozilla.com', '*.push.apple.com', '*.notify.windows.com']
$$;
REVOKE ALL ON FUNCTION herald.default_web_push_hosts() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.default_web_push_hosts() TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.default_web_push_hosts() TO herald_operator;

-- Whether a host matches one of the patterns: the host itself, *.domain (any name under the
-- domain, not the domain), or * (anything).
CREATE OR REPLACE FUNCTION herald.web_push_host_allowed(host text, patterns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(patterns) AS p(pattern)
                   WHERE p.pattern = '*' OR lower(p.pattern) = lower(host)
                      OR (p.pattern LIKE '*.%' AND length(host) > length(p.pattern) - 1
                          AND lower(right(host, length(p.pattern) - 1)) = lower(substr(p.pattern, 2))));
$$;
REVOKE ALL ON FUNCTION herald.web_push_host_allowed(text,text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.web_push_host_allowed(text,text[]) TO herald_daemon;

-- Whether a URL's host is a loopback, private or link-local address written as such (a name
-- that resolves to one is refused when the daemon connects).
CREATE OR REPLACE FUNCTION herald.is_private_host(host text) RETURNS boolean
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
REVOKE ALL ON FUNCTION herald.is_private_host(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.is_private_host(text) TO herald_daemon;

-- Which hosts each app's browsers' subscriptions may name (herald.token_kinds.endpoint_policy
-- of web_subscription): its herald.app_webpush row's, or for an app without one, the browsers'
-- push services (herald.default_web_push_hosts()).
CREATE OR REPLACE VIEW herald.web_push_endpoint_policy AS
SELECT a.app_id, coalesce(w.hosts, herald.default_web_push_hosts()) AS hosts,
       coalesce(w.private_addresses, false) AS private_addresses
FROM herald.apps a LEFT JOIN herald.app_webpush w ON w.app_id = a.app_id;
REVOKE ALL ON herald.web_push_endpoint_policy FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.web_push_endpoint_policy TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.web_push_endpoint_policy IS
    'Which hosts each app''s browser subscriptions may name, and whether private addresses may be reached: its herald.app_webpush row, or else the browsers'' push services';

-- Where an operator changes a kind's endpoint policy (its `column`), as errors name it: a
-- browser's policy is a view over herald.app_webpush.
CREATE OR REPLACE FUNCTION herald.endpoint_settings(kind herald.token_kinds, column_name text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
SELECT format('%s.%s', CASE WHEN kind.endpoint_policy = 'herald.web_push_endpoint_policy'::regclass
                            THEN 'herald.app_webpush' ELSE kind.endpoint_policy::text END, column_name)
$$;
REVOKE ALL ON FUNCTION herald.endpoint_settings(herald.token_kinds,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.endpoint_settings(herald.token_kinds,text) TO herald_daemon;

-- Refuses a subscription's endpoint (a token of a kind with an endpoint policy:
-- herald.token_kinds.endpoint_policy) that is not a plain https:// URL, or whose host the app's
-- row of that policy does not allow: a host not in its `hosts` (names, `*.domain`, or `*`), or a
-- loopback, private or link-local address unless `private_addresses`. An app without a row
-- takes no such token. The daemon checks the address it connects to again.
CREATE OR REPLACE FUNCTION herald.check_push_endpoint(endpoint text, app text, kind herald.token_kinds) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    hosts text[];
    private_addresses boolean;
    host text := substring(endpoint FROM '^https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/|$)');
BEGIN
    -- A host whose last label is a number, or that starts with 0x (127.1, 2130706433,
    -- 0x7f000001), is an address in one of the shorthands resolvers accept: only an address
    -- written as four decimal numbers is taken.
    IF host IS NULL OR octet_length(endpoint) > 2048 OR endpoint ~ '[[:space:][:cntrl:]]'
       OR ((host ~ '(^|\.)[0-9]+$' OR host ~* '^0x')
           AND host !~ '^(0|[1-9][0-9]{0,2})(\.(0|[1-9][0-9]{0,2})){3}$') THEN
        RAISE EXCEPTION 'herald.register_device: a subscription''s endpoint must be a plain https:// URL of at most 2048 bytes (a host name, an optional port, a path without spaces or control characters), not %',
            quote_literal(left(endpoint, 40)) USING ERRCODE = 'check_violation';
    END IF;
    EXECUTE format('SELECT p.hosts, p.private_addresses FROM %s p WHERE p.app_id = $1', kind.endpoint_policy)
    INTO hosts, private_addresses USING app;
    IF hosts IS NULL THEN
        RAISE EXCEPTION 'herald.register_device: app % takes no token of kind % (%) until it has a row in %',
            quote_literal(app), kind.token_kind, kind.description, kind.endpoint_policy USING ERRCODE = 'check_violation';
    END IF;
    IF NOT herald.web_push_host_allowed(host, hosts) THEN
        RAISE EXCEPTION 'herald.register_device: % is not a push service app % sends to', quote_literal(host), quote_literal(app)
            USING ERRCODE = 'check_violation',
                  HINT = format('%s lists the hosts allowed', herald.endpoint_settings(kind, 'hosts'));
    END IF;
    IF NOT private_addresses AND herald.is_private_host(host) THEN
        RAISE EXCEPTION 'herald.register_device: % is a loopback, private or link-local address', quote_literal(host)
            USING ERRCODE = 'check_violation',
                  HINT = format('only for a push service on this network: set %s',
                                herald.endpoint_settings(kind, 'private_addresses'));
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.check_push_endpoint(text,text,herald.token_kinds) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.check_push_endpoint(text,text,herald.token_kinds) TO herald_daemon;


-- The trigger of every provider's settings table (herald.providers.settings): a change to an
-- app's row renews the app's row in herald.apps, whose version the dispatch worker's claim
-- returns, so the daemons read the app's setups again at their next claim.
-- Whoever may change a provider's settings of an app may renew that app's version, hence
-- SECURITY DEFINER.
CREATE OR REPLACE FUNCTION herald.provider_settings_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp' AS $$
BEGIN
    UPDATE herald.apps a SET settings_changed_at = clock_timestamp()
    WHERE a.app_id IN (CASE WHEN TG_OP <> 'INSERT' THEN OLD.app_id END,
                       CASE WHEN TG_OP <> 'DELETE' THEN NEW.app_id END);
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.provider_settings_changed() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- What the daemons read of an app's Web Push settings (herald.providers.settings): its row of
-- herald.app_webpush, with Herald's default hosts when it names none.
CREATE OR REPLACE VIEW herald.app_webpush_settings AS
SELECT w.app_id, w.vapid_key_file, w.vapid_subject, coalesce(w.hosts, herald.default_web_push_hosts()) AS hosts,
       w.private_addresses
FROM herald.app_webpush w;
REVOKE ALL ON herald.app_webpush_settings FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.app_webpush_settings TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.app_webpush_settings IS
    'What the daemons read of an app''s Web Push settings: its herald.app_webpush row, with Herald''s default hosts when it names none';

-- Records when app `app`'s APNs certificate expires, as the dispatch worker read it from the
-- certificate's file (`expires_at`), for herald status; nothing when it is already known.
CREATE OR REPLACE FUNCTION herald.record_apns_certificate_expiry(app text, expires_at timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE herald.app_apns a SET certificate_expires_at = expires_at
    WHERE a.app_id = app AND a.certificate_expires_at IS DISTINCT FROM expires_at;
$$;
REVOKE ALL ON FUNCTION herald.record_apns_certificate_expiry(text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_apns_certificate_expiry(text,timestamp with time zone) TO herald_daemon;
