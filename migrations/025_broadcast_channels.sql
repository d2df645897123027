-- Broadcast push (#25; iOS 18): a Live Activity subscribed to a channel gets every update sent
-- to the channel, with one request for all its subscribers. A channel is a row here, made and
-- deleted at APNs by the channels worker (a herald.jobs row of kind 'channels' names it);
-- producers create, delete and send to channels with SQL (herald.create_channel,
-- delete_channel, broadcast_activity in functions/producers.sql). A broadcast is a notification
-- naming its channel (activity_channel) with one delivery, of payload kind broadcast.
CREATE TABLE herald.broadcast_channels (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id          text NOT NULL REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    -- The app's name for it (a match, a flight); free again once the channel is deleted or failed.
    name            text NOT NULL CHECK (name <> ''),
    -- Its message storage policy (1: APNs keeps the most recent message for offline devices; 0:
    -- none, and a larger publishing budget). It cannot change.
    stores_latest   boolean NOT NULL DEFAULT false,
    -- creating → active (APNs made it; channel_id is its id) → deleting → deleted; failed: APNs
    -- refused it, could not be reached for as long as the job's attempts last, or answered a
    -- broadcast that it does not know the channel (reason says).
    state           text NOT NULL DEFAULT 'creating'
                    CHECK (state IN ('creating', 'active', 'deleting', 'deleted', 'failed')),
    channel_id      text,
    reason          text,
    -- Its newest broadcast's time, notification and delivery: an older one is not sent, and a
    -- newer one supersedes one still waiting (as for an activity's tokens).
    event_at        timestamptz,
    last_notification_id bigint,
    last_delivery_id bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    changed_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (state NOT IN ('active', 'deleting') OR channel_id IS NOT NULL)
);
COMMENT ON TABLE herald.broadcast_channels IS
    'APNs broadcast channels (iOS 18): made and deleted at APNs by the channels worker';
-- A name is one live channel's: once it is being deleted, the name may make a new one.
CREATE UNIQUE INDEX broadcast_channels_name ON herald.broadcast_channels (app_id, name)
    WHERE state IN ('creating', 'active');
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.broadcast_channels TO herald_daemon;
GRANT SELECT ON herald.broadcast_channels TO herald_operator;

-- A broadcast's channel: its name, as the producer gave it, and the row ingest found for it (a
-- name deleted and made again is another channel).
ALTER TABLE herald.notifications ADD COLUMN activity_channel text, ADD COLUMN broadcast_channel_id bigint;

-- As in migration 024: every existing row met the narrower check.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic', 'web',
                            'live_activity', 'broadcast')) NOT VALID;

-- They gain a channel (functions/dispatch.sql, ingest.sql and producers.sql make them again).
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval);
DROP FUNCTION IF EXISTS herald.activity_event_problem(herald.notifications, herald.apps, herald.live_activities,
                                                      timestamp with time zone);
DROP FUNCTION IF EXISTS herald.activity_event(text, text, text, text, text, text[], text, jsonb, jsonb, text, text, text,
                                              timestamp with time zone, timestamp with time zone, double precision,
                                              boolean, interval, timestamp with time zone, text,
                                              timestamp with time zone);
