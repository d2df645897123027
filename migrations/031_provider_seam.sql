-- How a delivery goes out, as data every reader shares: the dispatch worker's claim returns each
-- delivery's route from these tables, and the retry worker, the operators' views and `herald
-- status` read the same rows. A provider adds its rows here (docs/architecture.md, "Adding a
-- provider").

-- The configurations an app can get wrong, one row of herald.app_config_problems each.
CREATE TABLE herald.config_scopes (
    scope   text PRIMARY KEY,
    -- What waits while it fails, as herald.app_problems says it.
    waiting text NOT NULL
);
INSERT INTO herald.config_scopes (scope, waiting) VALUES
    ('fcm', 'every delivery through FCM'),
    ('fcm_apns', 'iOS deliveries through FCM'),
    ('web', 'deliveries to browsers'),
    ('apns', 'iOS deliveries straight to APNs');
ALTER TABLE herald.app_config_problems
    DROP CONSTRAINT app_config_problems_scope_check,
    ADD FOREIGN KEY (scope) REFERENCES herald.config_scopes (scope);

-- What a device's push token can be (herald.devices.token_kind).
CREATE TABLE herald.token_kinds (
    token_kind  text PRIMARY KEY,
    -- The platforms whose devices may hold one.
    platforms   text[] NOT NULL,
    -- As herald.register_device's error lists it.
    description text NOT NULL
);
INSERT INTO herald.token_kinds (token_kind, platforms, description) VALUES
    ('registration_token', '{android,ios}', 'an FCM registration token'),
    ('installation_id', '{android,ios}', 'a Firebase Installation ID (FCM)'),
    ('apns_device_token', '{ios}', 'an APNs device token, hex'),
    ('web_subscription', '{web}', 'a browser''s push subscription');
ALTER TABLE herald.devices
    DROP CONSTRAINT devices_token_kind_check,
    ADD FOREIGN KEY (token_kind) REFERENCES herald.token_kinds (token_kind);

-- The push services Herald sends through, by the name each has in its registry of providers
-- (Sources/HeraldWorkers/Providers/Providers.swift). A provider whose apps need settings of
-- their own keeps them in its own table, named here: one row per app that uses it, keyed by
-- app_id, with herald.provider_settings_changed as its trigger, so that a change reaches the
-- daemons at their next claim.
CREATE TABLE herald.providers (
    provider text PRIMARY KEY,
    settings regclass
);
INSERT INTO herald.providers (provider) VALUES ('fcm'), ('apns'), ('webpush');
-- Renewed whenever a provider's settings of the app change (its row's version is what the
-- daemons compare).
ALTER TABLE herald.apps ADD COLUMN settings_changed_at timestamptz;

-- The ways out: each is sent by one provider, and waits while any configuration it needs is
-- failing. A setup that cannot be made (a missing key file) is a problem of its first scope.
CREATE TABLE herald.routes (
    route       text PRIMARY KEY,
    provider    text NOT NULL REFERENCES herald.providers (provider),
    -- As operators read it: "waiting: the configuration of app x for <description> is failing".
    description text NOT NULL,
    scopes      text[] NOT NULL CHECK (cardinality(scopes) > 0)
);
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('fcm', 'fcm', 'FCM', '{fcm}'),
    ('fcm_apns', 'fcm', 'iOS through FCM', '{fcm,fcm_apns}'),
    ('apns', 'apns', 'iOS straight to APNs', '{apns}'),
    ('web', 'webpush', 'browsers (Web Push)', '{web}');
ALTER TABLE herald.route_saturation
    DROP CONSTRAINT route_saturation_route_check,
    ADD FOREIGN KEY (route) REFERENCES herald.routes (route);

-- Which route a delivery takes: by its payload kind and the kind of its device's token, or with
-- no token kind (NULL) for a send to no device (a topic, a broadcast channel). A delivery whose
-- pair has no row is not sent: its device registered again as another platform since ingest.
CREATE TABLE herald.route_targets (
    payload_kind text NOT NULL,
    token_kind   text REFERENCES herald.token_kinds (token_kind),
    route        text NOT NULL REFERENCES herald.routes (route),
    UNIQUE NULLS NOT DISTINCT (payload_kind, token_kind)
);
INSERT INTO herald.route_targets (payload_kind, token_kind, route)
SELECT kind, token, 'fcm_apns'
FROM unnest('{ios_alert,ios_background,ios_wakeup,live_activity}'::text[]) AS kind,
     unnest('{registration_token,installation_id}'::text[]) AS token
UNION ALL
SELECT kind, 'apns_device_token', 'apns'
FROM unnest('{ios_alert,ios_background,ios_wakeup,live_activity}'::text[]) AS kind
UNION ALL
VALUES ('android_data', 'registration_token', 'fcm'),
       ('android_data', 'installation_id', 'fcm'),
       ('topic', NULL, 'fcm'),
       ('web', 'web_subscription', 'web'),
       ('broadcast', NULL, 'apns');

-- Migrations own these rows: everyone reads them (the daemon's default privileges, migration
-- 008, would let it write them too).
REVOKE ALL ON herald.config_scopes, herald.token_kinds, herald.providers, herald.routes, herald.route_targets
    FROM herald_operator, herald_daemon;
GRANT SELECT ON herald.config_scopes, herald.token_kinds, herald.providers, herald.routes, herald.route_targets
    TO herald_operator, herald_daemon;

-- The claim's columns change (it returns the route), and the apps' setups' (they carry each
-- provider's settings). herald.record_sends keeps its old signature beside the new one for a
-- release, for the previous release's daemons still running during an upgrade.
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval, bigint[]);
DROP FUNCTION IF EXISTS herald.app_setups(text[]);

-- What a dispatch batch records (herald.record_sends), one composite value each, by name: an
-- outcome per delivery; a dead token (a device's, or a Live Activity's); a configuration found
-- failing, or working again (problem NULL). Times are Unix seconds: a number binds without
-- formatting a timestamp per delivery.
CREATE TYPE herald.send_outcome AS (
    delivery_id  bigint,
    state        text,
    -- The provider's message name, and APNs' apns-unique-id.
    message_name text,
    unique_id    text,
    error        text,
    answered_at  float8,
    -- For one still queued, when it is due again.
    due_again    float8,
    -- A claim given back (postponed): not an attempt.
    given_back   boolean,
    -- It ran out of attempts.
    dead         boolean
);
CREATE TYPE herald.dead_token AS (
    -- herald.devices.id or herald.activity_tokens.id.
    id     bigint,
    -- The token that was sent to: a device that registered another since is left alone.
    token  text,
    reason text,
    -- When the provider says it died (APNs' 410 timestamp): a device that registered the token
    -- after that is left alone.
    since  float8
);
CREATE TYPE herald.config_problem AS (
    app_id  text,
    scope   text,
    problem text
);

-- Each built-in provider's settings of an app move from herald.apps to a table of its own, one row
-- per app that uses it. Herald reads only these now (herald.providers.settings). For one
-- release, herald.apps keeps the old columns, in step both ways: a write to them (an operator's
-- script, `UPDATE herald.apps SET apns_bundle_id = …`) is copied to the provider's table by
-- herald.sync_provider_settings_from_apps, and a write to a provider's table is copied back by
-- herald.sync_apps_from_provider_settings. The next release drops the old columns.
ALTER TABLE herald.apps ALTER COLUMN fcm_project_id DROP NOT NULL;

CREATE TABLE herald.app_fcm (
    app_id           text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    -- The Firebase project the app's messages go through (its quota is shared by every app in it).
    project_id       text NOT NULL CHECK (project_id <> ''),
    -- The service-account file; NULL: GOOGLE_APPLICATION_CREDENTIALS.
    credentials_file text
);
CREATE TABLE herald.app_apns (
    app_id                 text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    environment            text NOT NULL DEFAULT 'production' CHECK (environment IN ('production', 'development')),
    bundle_id              text,
    -- A token key (.p8) with its team and key id, or a push certificate (PEM with its key, or a
    -- .p12 bundle without a password).
    team_id                text,
    key_id                 text,
    key_file               text,
    certificate_file       text,
    -- When that certificate expires, as the daemon read it when it loaded the file.
    certificate_expires_at timestamptz
);
CREATE TABLE herald.app_webpush (
    app_id            text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    -- The VAPID key (`herald vapid-key` makes one) and the contact push services see.
    vapid_key_file    text,
    vapid_subject     text CHECK (vapid_subject LIKE 'mailto:%' OR vapid_subject LIKE 'https://%'),
    -- The push service hosts the app's browsers may name; NULL: herald.default_web_push_hosts().
    hosts             text[] CONSTRAINT "hosts lists host names, *.domain or *"
                          CHECK (cardinality(hosts) = 0 OR herald.are_host_patterns(hosts)),
    -- Whether they may be loopback, private or link-local addresses (a local push service).
    private_addresses boolean NOT NULL DEFAULT false
);
INSERT INTO herald.app_fcm (app_id, project_id, credentials_file)
SELECT app_id, fcm_project_id, credentials_file FROM herald.apps;
INSERT INTO herald.app_apns (app_id, environment, bundle_id, team_id, key_id, key_file, certificate_file,
                             certificate_expires_at)
SELECT app_id, apns_environment, apns_bundle_id, apns_team_id, apns_key_id, apns_key_file, apns_certificate_file,
       apns_certificate_expires_at
FROM herald.apps
WHERE num_nonnulls(apns_bundle_id, apns_team_id, apns_key_id, apns_key_file, apns_certificate_file,
                   apns_certificate_expires_at) > 0 OR apns_environment <> 'production';
INSERT INTO herald.app_webpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
SELECT app_id, vapid_key_file, vapid_subject, web_push_hosts, web_push_private_addresses
FROM herald.apps
WHERE num_nonnulls(vapid_key_file, vapid_subject, web_push_hosts) > 0 OR web_push_private_addresses;
-- Operators set them; the daemon reads them, and writes only a certificate's expiry.
REVOKE ALL ON herald.app_fcm, herald.app_apns, herald.app_webpush FROM herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_fcm, herald.app_apns, herald.app_webpush TO herald_operator;
GRANT SELECT ON herald.app_fcm, herald.app_apns, herald.app_webpush TO herald_daemon;
GRANT UPDATE (certificate_expires_at) ON herald.app_apns TO herald_daemon;

-- What the daemons read: the tables, and for browsers the hosts with Herald's default filled in
-- (the view is functions/apps.sql's, made here first since herald.providers names it).
CREATE OR REPLACE VIEW herald.app_webpush_settings AS
SELECT w.app_id, w.vapid_key_file, w.vapid_subject, coalesce(w.hosts, herald.default_web_push_hosts()) AS hosts,
       w.private_addresses
FROM herald.app_webpush w;
UPDATE herald.providers p SET settings = s.settings::regclass
FROM (VALUES ('fcm', 'herald.app_fcm'), ('apns', 'herald.app_apns'), ('webpush', 'herald.app_webpush_settings'))
     AS s(provider, settings)
WHERE p.provider = s.provider;

-- The triggers keeping the old columns in step. Their functions are made here empty, so that the
-- triggers can name them; functions/apps.sql gives them their bodies in the same `herald
-- migrate`, right after the numbered migrations.
CREATE OR REPLACE FUNCTION herald.sync_provider_settings_from_apps() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp' AS $$
BEGIN
    RETURN NULL;
END;
$$;
CREATE OR REPLACE FUNCTION herald.sync_apps_from_provider_settings() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp' AS $$
BEGIN
    RETURN NULL;
END;
$$;
CREATE TRIGGER provider_settings_from_apps AFTER INSERT OR UPDATE ON herald.apps
    FOR EACH ROW EXECUTE FUNCTION herald.sync_provider_settings_from_apps();
CREATE TRIGGER apps_from_app_fcm AFTER INSERT OR UPDATE OR DELETE ON herald.app_fcm
    FOR EACH ROW EXECUTE FUNCTION herald.sync_apps_from_provider_settings();
CREATE TRIGGER apps_from_app_apns AFTER INSERT OR UPDATE OR DELETE ON herald.app_apns
    FOR EACH ROW EXECUTE FUNCTION herald.sync_apps_from_provider_settings();
CREATE TRIGGER apps_from_app_webpush AFTER INSERT OR UPDATE OR DELETE ON herald.app_webpush
    FOR EACH ROW EXECUTE FUNCTION herald.sync_apps_from_provider_settings();
