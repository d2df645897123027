-- The platforms' newer options for a notification (#25), as herald.send's arguments:
--   ios_interruption_level   aps.interruption-level: passive, active, time-sensitive, critical
--   ios_relevance_score      aps.relevance-score, 0 to 1: which notification leads a summary
--   ios_filter_criteria      aps.filter-criteria: the Focus filter that lets it through
--   ios_target_content_id    aps.target-content-id: the window or content it brings forward
--   android_direct_boot_ok   android.direct_boot_ok: delivered before the device is unlocked
--   android_proxy            android.notification.proxy (allow, deny, if_priority_lowered): a
--                            notification message only, so a topic send's
-- Ingest checks them (a bad value rejects the notification with the reason), not the table: an
-- INSERT a producer writes by hand is kept whatever it holds.
ALTER TABLE herald.notifications
    ADD COLUMN ios_interruption_level text,
    ADD COLUMN ios_relevance_score double precision,
    ADD COLUMN ios_filter_criteria text,
    ADD COLUMN ios_target_content_id text,
    ADD COLUMN android_direct_boot_ok boolean,
    ADD COLUMN android_proxy text;

-- Both gain columns (functions/producers.sql and functions/dispatch.sql make them again).
DROP FUNCTION IF EXISTS herald.send(text, text, text[], text, text, text, jsonb, text, text, integer, text, text, text,
                                    text, text, text, interval, timestamp with time zone, text,
                                    timestamp with time zone, boolean, boolean);
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval);

-- A producer may write them in a plain INSERT too, as the other content columns.
GRANT INSERT (ios_interruption_level, ios_relevance_score, ios_filter_criteria, ios_target_content_id,
              android_direct_boot_ok, android_proxy)
    ON herald.notifications TO herald_producer;
