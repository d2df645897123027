-- Delivery truth, from Google: once a day per Android app, the FCM Data API's delivery data
-- (what share of the messages FCM accepted for the app each day it delivered, kept pending,
-- collapsed or dropped, and why), kept beside Herald's own count of what it sent that day.

-- The app's Firebase App ID for Android (`1:<project number>:android:<hash>`, in the Firebase
-- console's project settings): with it, its delivery data is read. NULL: not read.
ALTER TABLE herald.app_fcm ADD COLUMN android_app_id text CHECK (android_app_id ~ '^1:[0-9]+:android:[0-9a-f]+$');
COMMENT ON COLUMN herald.app_fcm.android_app_id IS 'The app''s Firebase App ID for Android (1:<project number>:android:<hash>): with it, a daemon reads the FCM Data API''s delivery data for the app once a day (herald.fcm_delivery_days). NULL: not read.';

-- One row per app, day and analytics label, as Google gives it, with Herald's count of the day.
CREATE TABLE herald.fcm_delivery_days (
    app_id                     text NOT NULL REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    day                        date NOT NULL,
    analytics_label            text NOT NULL,
    accepted                   bigint,
    delivered                  real,
    pending                    real,
    collapsed                  real,
    dropped_too_many_pending   real,
    dropped_app_force_stopped  real,
    dropped_device_inactive    real,
    dropped_ttl_expired        real,
    data                       jsonb NOT NULL,
    herald_sent                bigint,
    herald_held                bigint,
    read_at                    timestamptz NOT NULL,
    PRIMARY KEY (app_id, day, analytics_label)
);
COMMENT ON TABLE herald.fcm_delivery_days IS 'The FCM Data API''s delivery data of each Android app (herald.app_fcm.android_app_id), a row per day (Google''s, America/Los_Angeles) and analytics label, read once a day, beside Herald''s count of what it sent through FCM to the app''s Android devices that day. Kept for the retention.';
COMMENT ON COLUMN herald.fcm_delivery_days.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.fcm_delivery_days.day IS 'The day, as Google counts it (America/Los_Angeles).';
COMMENT ON COLUMN herald.fcm_delivery_days.analytics_label IS 'The messages'' analytics label; empty for those sent without one (Herald''s, unless a producer set one).';
COMMENT ON COLUMN herald.fcm_delivery_days.accepted IS 'Messages FCM accepted for the app that day, counting only devices that share usage and diagnostics with Google (countMessagesAccepted); the shares below are of these.';
COMMENT ON COLUMN herald.fcm_delivery_days.delivered IS 'Percent delivered to the device.';
COMMENT ON COLUMN herald.fcm_delivery_days.pending IS 'Percent neither delivered nor dropped by the day''s end: the device was offline (some arrive later).';
COMMENT ON COLUMN herald.fcm_delivery_days.collapsed IS 'Percent replaced by a later message with the same collapse key.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_too_many_pending IS 'Percent dropped because over 100 messages waited for the offline device (Herald''s catch-up exists for these).';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_app_force_stopped IS 'Percent dropped because the app was force-stopped.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_device_inactive IS 'Percent dropped because FCM holds the device inactive.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_ttl_expired IS 'Percent that expired before the device came online.';
COMMENT ON COLUMN herald.fcm_delivery_days.data IS 'Google''s whole data object for the day (delivery performance, priority lowered, proxy notifications, and whatever it adds).';
COMMENT ON COLUMN herald.fcm_delivery_days.herald_sent IS 'Deliveries Herald sent through FCM to the app''s Android devices that day (Google''s day), every label together; on the row of the empty label only.';
COMMENT ON COLUMN herald.fcm_delivery_days.herald_held IS 'Deliveries Herald held back that day because the device''s store at FCM was full (herald.deliveries.held_since); on the row of the empty label only.';
COMMENT ON COLUMN herald.fcm_delivery_days.read_at IS 'When it was last read from Google.';
CREATE TRIGGER fcm_delivery_days_noop BEFORE UPDATE ON herald.fcm_delivery_days
    FOR EACH ROW WHEN (OLD IS NOT DISTINCT FROM NEW) EXECUTE FUNCTION suppress_redundant_updates_trigger();
REVOKE ALL ON herald.fcm_delivery_days FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.fcm_delivery_days TO herald_daemon;
GRANT SELECT ON herald.fcm_delivery_days TO herald_operator;

-- When each app's delivery data is next read, and what the last read met.
CREATE TABLE herald.fcm_delivery_reads (
    app_id       text PRIMARY KEY REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    next_read_at timestamptz NOT NULL,
    read_at      timestamptz,
    problem      text
);
COMMENT ON TABLE herald.fcm_delivery_reads IS 'When each app''s FCM delivery data is read next (a daemon claims it by moving next_read_at on), when it was last read, and the problem the last read met.';
COMMENT ON COLUMN herald.fcm_delivery_reads.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.fcm_delivery_reads.next_read_at IS 'When a daemon reads it next: after a read, the next day''s; while a daemon reads it, that read''s end at the latest.';
COMMENT ON COLUMN herald.fcm_delivery_reads.read_at IS 'When it was last read. NULL: never.';
COMMENT ON COLUMN herald.fcm_delivery_reads.problem IS 'Why the last read failed (Google''s answer, the credentials), in words; NULL when it worked.';
REVOKE ALL ON herald.fcm_delivery_reads FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE ON herald.fcm_delivery_reads TO herald_daemon;
GRANT SELECT ON herald.fcm_delivery_reads TO herald_operator;

-- One day of delivery data as the daemon read it, for herald.record_fcm_delivery_days.
CREATE TYPE herald.fcm_delivery_day AS (
    day             date,
    analytics_label text,
    accepted        bigint,
    data            jsonb
);
