-- Xiaomi Mi Push: Xiaomi's phones (MIUI, HyperOS), which in mainland China have no Google
-- services, through Mi Push's server API (Sources/HeraldWorkers/Providers/Xiaomi/). A provider
-- added by its recipe (docs/architecture.md, "Adding a provider"): its rows, and its settings
-- table.
INSERT INTO herald.providers (provider, settings) VALUES ('xiaomi', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('xiaomi', 'deliveries through Xiaomi Mi Push');
-- A regId is opaque; Xiaomi documents neither its length nor its alphabet, so it is held to what
-- regIds seen so far are made of.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('xiaomi_regid', '{android}', 'a Xiaomi Mi Push regId', '^[A-Za-z0-9_.:=+/-]{16,}$',
     '16 or more letters, digits and -_.:=+/ (the regId MiPushClient.getRegId gave the app)');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('xiaomi', 'xiaomi', 'Android through Xiaomi Mi Push', '{xiaomi}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'xiaomi_regid', 'xiaomi');

-- An app's Mi Push setup, from Xiaomi's push console: a file holding its AppSecret (which never
-- enters the database), its package name, the region its phones are in (Mi Push reaches a phone
-- only through its region's host), and the channels (通知类别) the app registered with Xiaomi
-- for its service notifications (a private-message channel) and its marketing ones (a public
-- one). Without a channel, a notification goes in Mi Push's default class, one a day on each
-- phone.
CREATE TABLE herald.app_xiaomi (
    app_id               text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    app_secret_file      text NOT NULL CHECK (app_secret_file <> ''),
    package_name         text NOT NULL CHECK (package_name ~ '^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$'),
    region               text NOT NULL DEFAULT 'china'
                         CHECK (region IN ('china', 'singapore', 'europe', 'russia', 'india')),
    service_channel_id   text CHECK (service_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'),
    marketing_channel_id text CHECK (marketing_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$')
);
COMMENT ON TABLE herald.app_xiaomi IS 'An app''s Xiaomi Mi Push setup, one row per app that sends to Xiaomi phones.';
COMMENT ON COLUMN herald.app_xiaomi.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_xiaomi.app_secret_file IS 'A file holding the app''s AppSecret (Xiaomi''s push console), read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_xiaomi.package_name IS 'The app''s Android package name, as Mi Push''s restricted_package_name.';
COMMENT ON COLUMN herald.app_xiaomi.region IS 'Where the app''s phones are, which decides Mi Push''s host: china (the default), singapore (any other region), europe (the EEA and the UK), russia or india.';
COMMENT ON COLUMN herald.app_xiaomi.service_channel_id IS 'The channel (extra.channel_id) the app registered with Xiaomi as a private-message one, for its service notifications; NULL: Mi Push''s default class.';
COMMENT ON COLUMN herald.app_xiaomi.marketing_channel_id IS 'The channel the app registered with Xiaomi as a public-message one, for its marketing notifications; NULL: Mi Push''s default class.';
CREATE TRIGGER app_xiaomi_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_xiaomi
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_xiaomi FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_xiaomi TO herald_operator;
GRANT SELECT ON herald.app_xiaomi TO herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_xiaomi' WHERE provider = 'xiaomi';
