-- UnifiedPush: Android phones without Google's services (GrapheneOS, /e/OS, LineageOS…) that
-- receive through a distributor the user chose (ntfy, NextPush…), which takes standard Web Push
-- (RFC 8030 delivery, RFC 8291 encryption, RFC 8292 VAPID). A provider added by its recipe
-- (docs/architecture.md, "Adding a provider"); its sender is Web Push's
-- (Sources/HeraldWorkers/Providers/UnifiedPush/).

-- A token that is a Web Push subscription: the device registers its endpoint and keys as JSON
-- ({"endpoint", "keys": {"p256dh", "auth"}}), and herald.devices keeps the endpoint as its token
-- and the keys beside it. `endpoint_policy` names the view or table that says, per app, which
-- hosts its endpoints may name (`hosts`: names, `*.domain`, or `*` for any public host) and
-- whether private addresses may be reached (`private_addresses`); an app without a row there
-- takes no such token.
ALTER TABLE herald.token_kinds ADD COLUMN endpoint_policy regclass;
-- Browsers' policy: every app's, the browsers' push services unless its herald.app_webpush row
-- says otherwise. Its home is functions/apps.sql; made here first, with that file's text, since
-- the row below names it before that file is applied.
CREATE OR REPLACE VIEW herald.web_push_endpoint_policy AS
SELECT a.app_id, coalesce(w.hosts, herald.default_web_push_hosts()) AS hosts,
       coalesce(w.private_addresses, false) AS private_addresses
FROM herald.apps a LEFT JOIN herald.app_webpush w ON w.app_id = a.app_id;
UPDATE herald.token_kinds SET endpoint_policy = 'herald.web_push_endpoint_policy' WHERE token_kind = 'web_subscription';
-- herald.check_push_endpoint, which reads a kind's policy, replaces herald.check_web_push_endpoint;
-- the old one stays for a release: register_device calls it until functions/ is applied, in a
-- transaction after this one.

-- An app's UnifiedPush setup: the VAPID key it signs with (the public half is what the app
-- passes to its distributor when it registers) and its contact, and the distributors it
-- accepts. A distributor is whatever server the user picked, so by default any public host
-- ('{*}'); loopback, private, link-local and metadata addresses stay refused, at registration
-- and again at the address the daemon connects to, unless private_addresses is set.
CREATE TABLE herald.app_unifiedpush (
    app_id            text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    vapid_key_file    text NOT NULL CHECK (vapid_key_file <> ''),
    vapid_subject     text NOT NULL CHECK (vapid_subject ~ '^(mailto:|https://).'),
    hosts             text[] NOT NULL DEFAULT '{*}' CHECK (cardinality(hosts) > 0 AND herald.are_host_patterns(hosts)),
    private_addresses boolean NOT NULL DEFAULT false
);
CREATE TRIGGER app_unifiedpush_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_unifiedpush
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_unifiedpush FROM herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_unifiedpush TO herald_operator;
GRANT SELECT ON herald.app_unifiedpush TO herald_daemon;

INSERT INTO herald.token_kinds (token_kind, platforms, description, endpoint_policy) VALUES
    ('unifiedpush', '{android}', 'a UnifiedPush endpoint with its keys', 'herald.app_unifiedpush');
-- A device whose token is a subscription has its keys (a browser's, or a distributor's).
ALTER TABLE herald.devices
    ADD CONSTRAINT "a UnifiedPush device has its keys"
    CHECK (token_kind <> 'unifiedpush' OR push_token IS NULL
           OR (octet_length(web_p256dh) = 65 AND octet_length(web_auth) = 16)) NOT VALID;  -- no row has the kind yet

INSERT INTO herald.providers (provider, settings) VALUES ('unifiedpush', 'herald.app_unifiedpush');
INSERT INTO herald.config_scopes (scope, waiting) VALUES
    ('unifiedpush', 'deliveries to Android phones through UnifiedPush distributors');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('unifiedpush', 'unifiedpush', 'Android through UnifiedPush', '{unifiedpush}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'unifiedpush', 'unifiedpush');
