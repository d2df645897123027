-- vivo Push: vivo's phones (OriginOS, Funtouch OS), which in mainland China have no Google
-- services, through vivo Push's server API (Sources/HeraldWorkers/Providers/Vivo/). A provider
-- added by its recipe (docs/architecture.md, "Adding a provider"): its rows, and its settings
-- table.
INSERT INTO herald.providers (provider, settings) VALUES ('vivo', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('vivo', 'deliveries through vivo Push');
-- A regId is 23 characters in vivo's examples (doc 362: "长度23个字符"), of digits so far;
-- it is held to what regIds seen so far are made of, a little wider.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('vivo_token', '{android}', 'a vivo Push regId', '^[A-Za-z0-9_.:=+/-]{16,}$',
     '16 or more letters, digits and -_.:=+/ (the regId PushClient.getRegId gave the app)');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('vivo', 'vivo', 'Android through vivo Push', '{vivo}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'vivo_token', 'vivo');

-- An app's vivo Push setup, from vivo's open platform (消息推送, the app's page): its AppID and
-- AppKey, and a file holding its AppSecret (which never enters the database); the categories
-- (vivo's second-level classes, doc 359) its service notifications (system messages) and its
-- marketing ones (operation messages) go in; and whether it sends to its test phones only
-- (pushMode 1, all an app under review may do).
CREATE TABLE herald.app_vivo (
    app_id             text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    vivo_app_id        text NOT NULL CHECK (vivo_app_id ~ '^[0-9]{1,18}$'),
    app_key            text NOT NULL CHECK (app_key ~ '^[A-Za-z0-9-]{1,128}$'),
    app_secret_file    text NOT NULL CHECK (app_secret_file <> ''),
    service_category   text NOT NULL
                       CHECK (service_category IN ('IM', 'ACCOUNT', 'TODO', 'DEVICE_REMINDER', 'ORDER', 'SUBSCRIPTION')),
    marketing_category text NOT NULL DEFAULT 'MARKETING'
                       CHECK (marketing_category IN ('NEWS', 'CONTENT', 'MARKETING', 'SOCIAL')),
    test_mode          boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE herald.app_vivo IS 'An app''s vivo Push setup, one row per app that sends to vivo phones.';
COMMENT ON COLUMN herald.app_vivo.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_vivo.vivo_app_id IS 'The app''s AppID at vivo Push (digits).';
COMMENT ON COLUMN herald.app_vivo.app_key IS 'The app''s AppKey at vivo Push (not secret: the AppSecret signs with it).';
COMMENT ON COLUMN herald.app_vivo.app_secret_file IS 'A file holding the AppSecret, read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_vivo.service_category IS 'The system-message category (classification 1) of the app''s service notifications: IM, ACCOUNT, TODO, DEVICE_REMINDER, ORDER or SUBSCRIPTION, as vivo approved for the app.';
COMMENT ON COLUMN herald.app_vivo.marketing_category IS 'The operation-message category (classification 0) of its marketing notifications: NEWS, CONTENT, MARKETING (the default) or SOCIAL.';
COMMENT ON COLUMN herald.app_vivo.test_mode IS 'Send with pushMode 1: only to the test phones entered in vivo''s console (an app under review can send no other way).';
CREATE TRIGGER app_vivo_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_vivo
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_vivo FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_vivo TO herald_operator;
GRANT SELECT ON herald.app_vivo TO herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_vivo' WHERE provider = 'vivo';
