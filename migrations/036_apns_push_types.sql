-- APNs' push types beyond notifications and Live Activities: WidgetKit's push updates, PushKit's
-- VoIP calls, location queries and Push to Talk. Each goes to a token of its own that the app
-- gets from its own framework (not the device's notification token), registered beside the
-- device (herald.register_push_type_token) and sent with herald.send_push; all go straight to
-- APNs (Sources/HeraldWorkers/Providers/APNs/). Topics and headers are APNs' rules, kept with
-- the rest of them in Sources/HeraldAPNs; what a producer may send of each type is here.
--
-- No statement here reads the large tables: the new columns have no default, and the widened
-- CHECK is added NOT VALID (as in migration 024).

INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description, lowercase)
SELECT kind, '{ios}', description, '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the token as hex)', true
FROM (VALUES ('apns_widgets_token', 'a WidgetKit push token (WidgetPushInfo.token)'),
             ('apns_voip_token', 'a PushKit VoIP token (PKPushCredentials.token)'),
             ('apns_location_token', 'a location push token (CLLocationManager.startMonitoringLocationPushes)'),
             ('apns_pushtotalk_token', 'a Push to Talk token (PTChannelManager''s ephemeral push token)'))
     AS kinds (kind, description);

-- The push types a producer can send with herald.send_push, as APNs names them
-- (apns-push-type): the payload kind of their deliveries, the token kind they go to, and what
-- their notifications may hold.
CREATE TABLE herald.push_types (
    push_type         text PRIMARY KEY,
    -- As herald.send_push's error lists it.
    description       text NOT NULL,
    payload_kind      text NOT NULL UNIQUE,
    token_kind        text NOT NULL UNIQUE REFERENCES herald.token_kinds (token_kind),
    -- APNs' limit for the JSON sent: the producer's data and Herald's keys.
    max_payload_bytes int NOT NULL,
    -- Whether the producer's data goes (a widget push is only "content changed").
    takes_data        boolean NOT NULL,
    -- Whether priority 'normal' (APNs' 5) may be asked for; the others go at 10.
    may_be_normal     boolean NOT NULL,
    -- How long Herald tries, unless the producer says: a call or a talk burst that cannot ring
    -- now is not worth ringing later. NULL: the app's default_ttl.
    default_ttl       interval,
    max_ttl           interval NOT NULL
);
INSERT INTO herald.push_types VALUES
    ('widgets', 'WidgetKit push updates (the widgets reload their timelines; iOS 26)', 'ios_widgets',
     'apns_widgets_token', 4096, false, false, NULL, '28 days'),
    ('voip', 'PushKit VoIP calls (the app reports each to CallKit)', 'ios_voip', 'apns_voip_token', 5120, true, false,
     '30 seconds', '2 minutes'),
    ('location', 'location queries (the app''s Location Push Service Extension answers)', 'ios_location',
     'apns_location_token', 4096, true, true, NULL, '28 days'),
    ('pushtotalk', 'Push to Talk (the system wakes the app to play a channel''s audio)', 'ios_pushtotalk',
     'apns_pushtotalk_token', 4096, true, false, '10 seconds', '1 minute');

-- A device's tokens for these push types, one of each kind at most, beside its own token: a
-- token APNs refuses is disabled here alone, and the device's notifications go on. Like a
-- device's token, a token is one device's (registered by another device of the app, it moves
-- there), and one APNs declared dead stays dead when registered again.
CREATE TABLE herald.push_type_tokens (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Gone with its device; a disabled device is sent none.
    device_id       bigint NOT NULL REFERENCES herald.devices (id) ON DELETE CASCADE,
    token_kind      text NOT NULL REFERENCES herald.push_types (token_kind),
    -- Hex, lower case.
    token           text NOT NULL CHECK (token ~ '^([0-9a-f]{2}){32,}$' AND octet_length(token) <= 8192),
    registered_at   timestamptz NOT NULL DEFAULT now(),
    disabled_at     timestamptz,
    -- token_invalid: APNs declared it dead; unregistered: the app said it is no longer good;
    -- token_moved: another device of the app registered it.
    disabled_cause  text CHECK (disabled_cause IN ('token_invalid', 'unregistered', 'token_moved')),
    disabled_reason text,
    UNIQUE (device_id, token_kind),
    CHECK ((disabled_at IS NULL) = (disabled_cause IS NULL) AND (disabled_at IS NULL) = (disabled_reason IS NULL))
);
CREATE INDEX push_type_tokens_token ON herald.push_type_tokens (token) WHERE disabled_at IS NULL;
COMMENT ON TABLE herald.push_type_tokens IS
    'each device''s tokens for APNs'' widgets, VoIP, location and Push to Talk pushes (herald.register_push_type_token)';

-- Written only by herald.send_push (producers have no grant on it).
ALTER TABLE herald.notifications ADD COLUMN push_type text;
ALTER TABLE herald.deliveries ADD COLUMN push_type_token_id bigint;
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic', 'web',
                            'live_activity', 'broadcast', 'harmony_alert', 'harmony_background', 'ios_widgets',
                            'ios_voip', 'ios_location', 'ios_pushtotalk')) NOT VALID;

-- Always straight to APNs, whatever the device's own token: FCM carries neither PushKit nor
-- these topics, so an iPhone whose notifications go through FCM needs the app's APNs setup too.
INSERT INTO herald.route_targets (payload_kind, token_kind, route)
SELECT payload_kind, token_kind, 'apns' FROM herald.push_types;

REVOKE ALL ON herald.push_types, herald.push_type_tokens FROM herald_operator, herald_daemon;
GRANT SELECT ON herald.push_types TO herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.push_type_tokens TO herald_daemon;
-- Operators see every column but the token itself.
GRANT SELECT (id, device_id, token_kind, registered_at, disabled_at, disabled_cause, disabled_reason)
    ON herald.push_type_tokens TO herald_operator;

-- The claim returns each delivery's push type token. (herald.record_sends takes the ones APNs
-- refused as a seventh argument, beside its six-argument form, which the previous release's
-- daemons call.)
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval, bigint[]);
