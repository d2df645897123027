-- Huawei Push Kit: Android phones with HMS Core (no Google services), through Push Kit's v1
-- server API (Sources/HeraldWorkers/Providers/HMS/). A provider added by its recipe
-- (docs/architecture.md, "Adding a provider"): its rows, and its settings table.
INSERT INTO herald.providers (provider, settings) VALUES ('hms', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('hms', 'deliveries through Huawei Push Kit');
-- A Push Kit token is opaque; Huawei documents neither its length nor its alphabet, so it is
-- held to what tokens seen so far are made of.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('hms_token', '{android}', 'a Huawei Push Kit token', '^[A-Za-z0-9_.:=+/-]{16,}$',
     '16 or more letters, digits and -_.:=+/ (the token HmsInstanceId.getToken gave the app)');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('hms', 'hms', 'Android through Huawei Push Kit', '{hms}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES ('android_data', 'hms_token', 'hms');

-- An app's Push Kit credentials, from AppGallery Connect (Project settings, App information):
-- its OAuth 2.0 client id (the app id), and a file holding its client secret, which never
-- enters the database.
CREATE TABLE herald.app_hms (
    app_id             text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    client_id          text NOT NULL CHECK (client_id ~ '^[0-9]{1,64}$'),
    client_secret_file text NOT NULL CHECK (client_secret_file <> '')
);
-- Its trigger's function is functions/apps.sql's, made here first (with the file's text) since
-- the trigger names it before that file is applied.
CREATE OR REPLACE FUNCTION herald.provider_settings_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path TO 'pg_catalog', 'pg_temp' AS $$
BEGIN
    UPDATE herald.apps a SET settings_changed_at = clock_timestamp()
    WHERE a.app_id IN (CASE WHEN TG_OP <> 'INSERT' THEN OLD.app_id END,
                       CASE WHEN TG_OP <> 'DELETE' THEN NEW.app_id END);
    RETURN NULL;
END;
$$;
CREATE TRIGGER app_hms_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_hms
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_hms FROM herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_hms TO herald_operator;
GRANT SELECT ON herald.app_hms TO herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_hms' WHERE provider = 'hms';
