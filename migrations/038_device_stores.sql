-- Catch-up for providers that keep a bounded store per device. FCM keeps at most 100
-- non-collapsible messages for an offline Android phone, and past that drops every one of them:
-- the app is told only that messages were deleted. Herald now counts, per device, what it let
-- such a provider hold and the app has not reported; past the route's capacity the device's
-- further notifications wait in Herald (held), and it gets one collapsible catch-up message,
-- Android's wake-up, that makes the app fetch what it missed. A report releases what waits; a
-- fetch (herald.missed_notifications) marks it delivered. migrations/functions/ingest.sql and
-- reconcile.sql hold the rules.
--
-- The new index reads each partition of deliveries once, at this upgrade, while writes to
-- deliveries wait (a pause of the daemons' sends and records, as long as the build: plan the
-- upgrade for a quiet moment on a large database); it holds only the deliveries counted or held,
-- a small share. The new columns have no default.

ALTER TABLE herald.routes ADD COLUMN device_store_capacity int CHECK (device_store_capacity > 0);
UPDATE herald.routes SET device_store_capacity = 80 WHERE route = 'fcm';

ALTER TABLE herald.devices ADD COLUMN last_reported_at timestamptz;

ALTER TABLE herald.deliveries
    ADD COLUMN stored_until timestamptz,
    ADD COLUMN held_since timestamptz,
    ADD COLUMN fetched_at timestamptz;
-- A device's deliveries counted in its store (sent since it last reported, or not sent yet) or
-- held beside it (not sent), for the count, the release and the fetch.
CREATE INDEX deliveries_in_device_store ON herald.deliveries (device_id, sent_at)
    WHERE state IN ('queued', 'sent') AND (stored_until IS NOT NULL OR held_since IS NOT NULL);

ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind IN ('android_data', 'android_wakeup', 'ios_alert', 'ios_background', 'ios_wakeup', 'topic',
                            'web', 'live_activity', 'broadcast', 'harmony_alert', 'harmony_background', 'ios_widgets',
                            'ios_voip', 'ios_location', 'ios_pushtotalk')) NOT VALID;
INSERT INTO herald.route_targets (payload_kind, token_kind, route)
VALUES ('android_wakeup', 'registration_token', 'fcm'), ('android_wakeup', 'installation_id', 'fcm');


COMMENT ON COLUMN herald.routes.device_store_capacity IS
    'For a provider that keeps a bounded number of messages per offline device and drops them all past it: how many of one device''s unreported messages Herald lets it hold at once (80 for FCM, whose limit is 100; the margin is for messages the app''s own servers send, and sends repeated after a lost answer). Past it the device''s notifications are held (herald.deliveries.held_since). NULL: no such limit.';
COMMENT ON COLUMN herald.devices.last_reported_at IS
    'When the app last reported a delivery to this device (herald.reconcile). A device that has reported since its registration began has its deliveries counted against its provider''s store (herald.routes.device_store_capacity). NULL: never.';
COMMENT ON COLUMN herald.deliveries.stored_until IS
    'For a delivery counted in its device''s store at the provider (herald.routes.device_store_capacity): until when the provider may keep it there, its expiry. It counts while queued, or sent and unreported since the device last reported (herald.stored_messages). NULL: not counted.';
COMMENT ON COLUMN herald.deliveries.held_since IS
    'When it began waiting because its device''s store at the provider was full; while held, run_at is its expiry. A report from the device releases it (herald.reconcile), a fetch marks it delivered (herald.missed_notifications). NULL: not held.';
COMMENT ON COLUMN herald.deliveries.fetched_at IS
    'When the app''s backend first fetched it for the app (herald.missed_notifications); once the app asks past it, it is delivered. A held delivery fetched is not released to be sent. NULL: not fetched.';
COMMENT ON COLUMN herald.deliveries.payload_kind IS
    'What is sent, set from the platform or push type: android_data, android_wakeup, ios_alert, ios_background, ios_wakeup, topic, web, live_activity, broadcast, harmony_alert, harmony_background, ios_widgets, ios_voip, ios_location or ios_pushtotalk. With the token''s kind it picks the route (herald.route_rules).';
COMMENT ON COLUMN herald.deliveries.state IS
    'queued (waiting, leased, backing off or held), sent (accepted by the provider), validated (a dry run), delivered (reported or fetched by the app), expired, cancelled (device or token gone, or superseded), token_invalid or failed (refused for good, or dead).';
COMMENT ON COLUMN herald.deliveries.delivered_at IS
    'When the app first reported it (delivered, seen or opened; herald.reconcile) or fetched it (herald.missed_notifications). NULL: neither.';
COMMENT ON COLUMN herald.deliveries.run_at IS
    'When a queued delivery is next due: send_at or its creation, a retry''s backoff, a postponement, its lease''s end while locked_by holds it, or its expiry while held. Unused once not queued.';
COMMENT ON COLUMN herald.notifications.origin IS
    'Who made it: producer, or wakeup (a silent push that makes an app fetch what it missed: herald.reconcile''s to an iOS device, or an Android device''s catch-up message when its store at FCM is full).';
COMMENT ON TABLE herald.wakeups IS
    'One row per wake-up: a silent push herald.reconcile sent an iOS device whose report showed it missed notifications (APNs keeps only the newest), or the catch-up message an Android device gets when its store at FCM is full and its notifications are held. The exclusion constraint keeps one per device per quiet period across all daemons; pruned by herald.prune_records.';
COMMENT ON COLUMN herald.wakeups.device_id IS
    'The device woken (herald.devices.id); the row goes with the device.';
COMMENT ON COLUMN herald.wakeups.report_id IS
    'The report that revealed the gap (herald.delivery_reports.id, the newest of the batch''s for the device). NULL for a catch-up message, which no report prompts.';
COMMENT ON COLUMN herald.wakeups.missed IS
    'How many notifications the device missed when it was decided: for iOS its alerts sent but unreported, for a catch-up message those held; what the woken app fetches (herald.missed_notifications, herald.pending_notifications).';
COMMENT ON COLUMN herald.wakeups.notification_id IS
    'The silent notification (origin wakeup) made for it, with one ios_wakeup or android_wakeup delivery; set in the same transaction.';
COMMENT ON COLUMN herald.wakeups.created_at IS
    'When the wake-up was decided: the start of the device''s quiet period.';
