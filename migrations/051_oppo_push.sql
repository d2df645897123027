-- OPPO Push: OPPO's phones (ColorOS), and OnePlus's and realme's, which in mainland China have
-- no Google services, through OPPO Push's server API (Sources/HeraldWorkers/Providers/OPPO/). A
-- provider added by its recipe (docs/architecture.md, "Adding a provider"): its rows, and its
-- settings table.
INSERT INTO herald.providers (provider, settings) VALUES ('oppo', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('oppo', 'deliveries through OPPO Push');
-- A registration id is, by OPPO's server SDK (Validate.PATTERN_REGISTRATION_ID), 32 hex digits,
-- after an optional region prefix and its parts ("CN_…", "OPPO_CN_…"), or a 24-hex-digit object
-- id.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('oppo_token', '{android}', 'an OPPO Push registration id',
     '^((([0-9A-Za-z]{2,10})_)?[A-Za-z0-9_]*_)?[0-9a-fA-F]{32}$|^[0-9a-fA-F]{24}$',
     '32 hex digits after an optional prefix such as CN_, or 24 hex digits (the registration id HeytapPushManager.getRegister gave the app)');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('oppo', 'oppo', 'Android through OPPO Push', '{oppo}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'oppo_token', 'oppo');

-- An app's OPPO Push setup, from OPPO's push platform (配置管理 > 应用配置): its AppKey and a file
-- holding its MasterSecret (not the AppSecret; the secret never enters the database), the
-- region its phones are in, the private channel (通讯与服务, registered with OPPO) its service
-- notifications go in and the OPPO category they are of, and the public channel its marketing
-- ones go in. Without a private channel, service notifications go through the public channel
-- too, and count against its daily limit.
CREATE TABLE herald.app_oppo (
    app_id               text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    app_key              text NOT NULL CHECK (app_key ~ '^[A-Za-z0-9]{1,64}$'),
    master_secret_file   text NOT NULL CHECK (master_secret_file <> ''),
    region               text NOT NULL DEFAULT 'china' CHECK (region IN ('china', 'international')),
    service_channel_id   text CHECK (service_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'),
    marketing_channel_id text CHECK (marketing_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'),
    service_category     text NOT NULL DEFAULT 'ACCOUNT'
                         CHECK (service_category IN ('IM', 'ACCOUNT', 'DEVICE_REMINDER', 'ORDER', 'TODO', 'SUBSCRIPTION'))
);
COMMENT ON TABLE herald.app_oppo IS 'An app''s OPPO Push setup, one row per app that sends to OPPO, OnePlus and realme phones.';
COMMENT ON COLUMN herald.app_oppo.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_oppo.app_key IS 'The app''s AppKey at OPPO Push (not its AppId), as the auth request sends it.';
COMMENT ON COLUMN herald.app_oppo.master_secret_file IS 'A file holding the app''s MasterSecret (OPPO''s push platform), read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_oppo.region IS 'Where the app''s phones are, which decides OPPO Push''s host: china (the default) or international.';
COMMENT ON COLUMN herald.app_oppo.service_channel_id IS 'The private channel (通讯与服务) the app registered with OPPO, for its service notifications; NULL: they go through the public channel.';
COMMENT ON COLUMN herald.app_oppo.marketing_channel_id IS 'A public channel the app registered with OPPO, for its marketing notifications; NULL: OPPO''s default one.';
COMMENT ON COLUMN herald.app_oppo.service_category IS 'The OPPO category of the app''s service notifications, one of its service ones: IM, ACCOUNT (the default), DEVICE_REMINDER, ORDER, TODO or SUBSCRIPTION; marketing ones are MARKETING.';
CREATE TRIGGER app_oppo_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_oppo
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_oppo FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_oppo TO herald_operator;
GRANT SELECT ON herald.app_oppo TO herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_oppo' WHERE provider = 'oppo';
