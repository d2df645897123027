-- Live Activities (#25; iOS 17.2 and later, through APNs, straight or through FCM). A Live
-- Activity is a row here; its tokens are rows of herald.activity_tokens; each of its events
-- (start, update, end) is a notification (herald.start_activity, update_activity, end_activity in
-- functions/producers.sql), ingested into one delivery per token (payload kind live_activity)
-- and sent, retried and recorded as every other delivery is.
--
-- No statement here reads the large tables: the new columns have no default, and the widened
-- CHECK constraints are added NOT VALID. Each replaces a narrower one that every existing row
-- met, so every existing row meets it too, and a full scan under the table's lock (the
-- deliveries can be billions of rows) would prove nothing new. New rows are checked as always.

CREATE TABLE herald.live_activities (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id          text NOT NULL REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    -- The app's name for it (an order id, a match id): used once per app.
    activity_id     text NOT NULL CHECK (activity_id <> ''),
    -- The app's ActivityAttributes type, as ActivityKit names it (`attributes-type`).
    attributes_type text NOT NULL,
    user_ref        text,
    -- producer: herald.start_activity started it on the user's devices; app: an app started it
    -- on the device itself and registered its update token.
    started_by      text NOT NULL CHECK (started_by IN ('producer', 'app')),
    state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'ended')),
    -- As of its newest event: what the devices show, and the event's time (aps.timestamp). An
    -- event older than event_at is not sent (its notification ends `superseded`).
    content_state   jsonb,
    event_at        timestamptz,
    last_notification_id bigint,
    stale_at        timestamptz,
    dismiss_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    UNIQUE (app_id, activity_id),
    CHECK ((state = 'ended') = (ended_at IS NOT NULL))
);
COMMENT ON TABLE herald.live_activities IS
    'Live Activities: one row each, with its newest content state; its events are notifications (activity_id)';

CREATE TABLE herald.activity_tokens (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The device it is on (herald.devices.id): disabling the device stops its activity sends too.
    device_id       bigint NOT NULL REFERENCES herald.devices (id) ON DELETE CASCADE,
    -- push_to_start: the app's token to start activities of attributes_type on this device
    -- (ActivityKit's pushToStartToken); update: one running activity's token (its pushToken).
    kind            text NOT NULL CHECK (kind IN ('push_to_start', 'update')),
    attributes_type text NOT NULL,
    live_activity_id bigint REFERENCES herald.live_activities (id) ON DELETE CASCADE,
    -- An APNs token, hex, as ActivityKit gives it (lower-cased).
    token           text NOT NULL CHECK (token ~ '^[0-9a-f]{64,200}$'),
    registered_at   timestamptz NOT NULL DEFAULT now(),
    -- An update token's newest delivery: an older one still queued is superseded by it.
    last_delivery_id bigint,
    ended_at        timestamptz,
    -- activity_ended: its activity's end event was ingested (the end still goes to it);
    -- dismissed / unregistered: the app said so; replaced: the app registered a new token in its
    -- place; token_invalid: APNs (or FCM) declared it dead.
    ended_cause     text CHECK (ended_cause IN ('activity_ended', 'dismissed', 'unregistered', 'replaced',
                                                'token_invalid')),
    ended_reason    text,
    CHECK ((kind = 'update') = (live_activity_id IS NOT NULL)),
    CHECK ((ended_at IS NULL) = (ended_cause IS NULL)),
    CHECK ((ended_at IS NULL) = (ended_reason IS NULL))
);
COMMENT ON TABLE herald.activity_tokens IS
    'Live Activity tokens: each device''s push-to-start token per activity type, and each running activity''s update token';
-- One live token of each: a new one replaces the old.
CREATE UNIQUE INDEX activity_tokens_push_to_start ON herald.activity_tokens (device_id, attributes_type)
    WHERE kind = 'push_to_start' AND ended_at IS NULL;
CREATE UNIQUE INDEX activity_tokens_update ON herald.activity_tokens (live_activity_id, device_id)
    WHERE kind = 'update' AND ended_at IS NULL;
CREATE INDEX activity_tokens_token ON herald.activity_tokens (token) WHERE ended_at IS NULL;

GRANT SELECT, INSERT, UPDATE, DELETE ON herald.live_activities, herald.activity_tokens TO herald_daemon;
GRANT SELECT ON herald.live_activities TO herald_operator;
GRANT SELECT (id, device_id, kind, attributes_type, live_activity_id, registered_at, last_delivery_id, ended_at,
              ended_cause, ended_reason)
    ON herald.activity_tokens TO herald_operator;

-- An event of a Live Activity, written by herald.start_activity, update_activity or
-- end_activity (producers write no activity column themselves: the functions check who acts for
-- the app). title, body and sound make its alert; priority its apns-priority;
-- ios_relevance_score its relevance-score.
ALTER TABLE herald.notifications
    ADD COLUMN activity_id text,
    ADD COLUMN activity_event text,
    ADD COLUMN activity_attributes_type text,
    ADD COLUMN activity_attributes jsonb,
    ADD COLUMN activity_content_state jsonb,
    ADD COLUMN activity_stale_at timestamptz,
    ADD COLUMN activity_dismiss_at timestamptz,
    -- aps.timestamp: when the event happened, by which the newest wins.
    ADD COLUMN activity_event_at timestamptz;

-- An update or an end names its activity, and that is its target.
ALTER TABLE herald.notifications DROP CONSTRAINT "exactly one target: user_ref, device_ids or topic";
ALTER TABLE herald.notifications ADD CONSTRAINT "exactly one target: user_ref, device_ids or topic"
    CHECK (num_nonnulls(user_ref, device_ids, topic)
           = CASE WHEN activity_event IN ('update', 'end') THEN 0 ELSE 1 END) NOT VALID;
-- superseded: a Live Activity event older than one its activity had already taken.
ALTER TABLE herald.notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_state_check
    CHECK (state IN ('received', 'accepted', 'rejected', 'expired', 'no_devices', 'superseded')) NOT VALID;

-- A Live Activity delivery goes to one of the activity's tokens, on its device.
ALTER TABLE herald.deliveries ADD COLUMN activity_token_id bigint;
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic', 'web',
                            'live_activity')) NOT VALID;

-- It returns the activity's columns too (functions/dispatch.sql makes it again).
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval);

-- Which notifications are an activity's events, for the operator's view of its life
-- (herald.live_activity_sends): the notifications have no index on activity_id, and building one
-- would read every partition.
CREATE TABLE herald.activity_events (
    live_activity_id bigint NOT NULL REFERENCES herald.live_activities (id) ON DELETE CASCADE,
    notification_id  bigint NOT NULL,
    PRIMARY KEY (live_activity_id, notification_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.activity_events TO herald_daemon;
GRANT SELECT ON herald.activity_events TO herald_operator;

-- They count the events superseded too (functions/ingest.sql makes them again).
DROP FUNCTION IF EXISTS herald.ingest_next(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS herald.ingest(bigint[], timestamp with time zone);
