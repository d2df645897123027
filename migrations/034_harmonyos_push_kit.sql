-- HarmonyOS NEXT phones, which run no Android, through Huawei Push Kit's v3 (scenario) API
-- (Sources/HeraldWorkers/Providers/Harmony/). A provider added by its recipe
-- (docs/architecture.md, "Adding a provider"), with the platform its phones are.

-- The platforms a device can be, as data: what a notification becomes for a device of each (a
-- silent one, and any other), and the token kind its devices hold unless they say another.
-- herald.register_device checks a device's platform here, and herald.ingest makes each
-- delivery's payload kind from it.
CREATE TABLE herald.platforms (
    platform            text PRIMARY KEY,
    -- As herald.register_device's error lists it.
    description         text NOT NULL,
    payload_kind        text NOT NULL,
    silent_payload_kind text NOT NULL,
    default_token_kind  text NOT NULL REFERENCES herald.token_kinds (token_kind)
);
INSERT INTO herald.platforms (platform, description, payload_kind, silent_payload_kind, default_token_kind) VALUES
    ('android', 'an Android phone', 'android_data', 'android_data', 'registration_token'),
    -- An app that sends to APNs directly registers apns_device_token (herald.register_device).
    ('ios', 'an iPhone or iPad', 'ios_alert', 'ios_background', 'registration_token'),
    ('web', 'a browser', 'web', 'web', 'web_subscription');

-- A HarmonyOS Push Kit token is opaque; Huawei documents neither its length nor its alphabet
-- (and says not to rely on either), so it is held to what tokens seen so far are made of.
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description) VALUES
    ('harmony_token', '{harmony}', 'a HarmonyOS Push Kit token', '^[A-Za-z0-9_.:=+/-]{16,}$',
     '16 or more letters, digits and -_.:=+/ (the token pushService.getToken gave the app)');
-- Push Kit shows a notification (push-type 0, an alert) itself; a silent notification is a
-- background message (push-type 6), handed to the app.
INSERT INTO herald.platforms (platform, description, payload_kind, silent_payload_kind, default_token_kind) VALUES
    ('harmony', 'a HarmonyOS NEXT phone', 'harmony_alert', 'harmony_background', 'harmony_token');
ALTER TABLE herald.devices DROP CONSTRAINT devices_platform_check,
    ADD FOREIGN KEY (platform) REFERENCES herald.platforms (platform);
-- As in migration 024: every existing row met the narrower check.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic', 'web',
                            'live_activity', 'broadcast', 'harmony_alert', 'harmony_background')) NOT VALID;

INSERT INTO herald.providers (provider, settings) VALUES ('harmony', NULL);
INSERT INTO herald.config_scopes (scope, waiting) VALUES ('harmony', 'deliveries to HarmonyOS phones');
INSERT INTO herald.routes (route, provider, description, scopes) VALUES
    ('harmony', 'harmony', 'HarmonyOS through Push Kit', '{harmony}');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES
    ('harmony_alert', 'harmony_token', 'harmony'),
    ('harmony_background', 'harmony_token', 'harmony');

-- An app's HarmonyOS Push Kit setup: the service account's key file (from the HUAWEI
-- Developers API Console), which names the project its messages go through and never enters
-- the database; and the category its notifications are sent as. Push Kit takes a category
-- other than MARKETING only from an app granted the right to classify its notifications (in
-- AppGallery Connect), and limits MARKETING notifications to a few a day on each phone.
CREATE TABLE herald.app_harmony (
    app_id               text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    service_account_file text NOT NULL CHECK (service_account_file <> ''),
    category             text NOT NULL DEFAULT 'MARKETING'
                         CHECK (category IN ('IM', 'VOIP', 'SUBSCRIPTION', 'TRAVEL', 'HEALTH', 'WORK', 'ACCOUNT',
                                             'EXPRESS', 'FINANCE', 'DEVICE_REMINDER', 'MAIL', 'MARKETING'))
);
CREATE TRIGGER app_harmony_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_harmony
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
REVOKE ALL ON herald.app_harmony, herald.platforms FROM herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.app_harmony TO herald_operator;
GRANT SELECT ON herald.app_harmony TO herald_daemon;
GRANT SELECT ON herald.platforms TO herald_operator, herald_daemon;
UPDATE herald.providers SET settings = 'herald.app_harmony' WHERE provider = 'harmony';
