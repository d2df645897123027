-- Honor Push: Honor's phones (Magic UI), which in mainland China have no Google services, through
-- Honor Push's server API (Sources/HeraldWorkers/Providers/Honor/). A provider added by its
-- recipe (docs/architecture.md, "Adding a provider"): its rows, and its settings table.
INSERT INTO herald.providers (provider, settings) VALUES ('honor', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('honor', 'deliveries through Honor Push');
-- A push token is opaque; Honor documents neither its length nor its alphabet, so it is held to
-- what tokens seen so far are made of.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('honor_token', '{android}', 'an Honor Push token', '^[A-Za-z0-9_.:=+/-]{16,}$',
     '16 or more letters, digits and -_.:=+/ (the token HonorPushClient.getPushToken gave the app)');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('honor', 'honor', 'Android through Honor Push', '{honor}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'honor_token', 'honor');

-- An app's Honor Push setup, from Honor's developer console (the push service's page): its app
-- id, which names it in the send URL, and its OAuth 2.0 client (the Client ID and a file holding
-- the Client Secret, not the App Secret; the secret never enters the database).
CREATE TABLE herald.app_honor (
    app_id             text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    honor_app_id       text NOT NULL CHECK (honor_app_id ~ '^[0-9]{1,64}$'),
    client_id          text NOT NULL CHECK (client_id ~ '^[A-Za-z0-9_.-]{1,128}$'),
    client_secret_file text NOT NULL CHECK (client_secret_file <> '')
);
COMMENT ON TABLE herald.app_honor IS 'An app''s Honor Push setup, one row per app that sends to Honor phones.';
COMMENT ON COLUMN herald.app_honor.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_honor.honor_app_id IS 'The app''s id at Honor Push (digits), as its send URL names it.';
COMMENT ON COLUMN herald.app_honor.client_id IS 'The push service''s OAuth 2.0 Client ID (Honor''s console), not the app id.';
COMMENT ON COLUMN herald.app_honor.client_secret_file IS 'A file holding the Client Secret, read by the daemon; the secret never enters the database.';
CREATE TRIGGER app_honor_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_honor
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_honor FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_honor TO herald_operator;
GRANT SELECT ON herald.app_honor TO herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_honor' WHERE provider = 'honor';
