-- The statements the workers ran as text of their own are functions now: the channel worker's
-- (migrations/functions/channels.sql), the ingest worker's one-at-a-time fallback
-- (herald.notifications_waiting, herald.reject_unprocessable in functions/ingest.sql) and the
-- record of an APNs certificate's expiry (herald.record_apns_certificate_expiry in
-- functions/apps.sql). Nothing changes here: this migration marks the release, so that an older
-- binary's `herald migrate` leaves the newer function files alone (migrations/README.md).
SELECT 1;
