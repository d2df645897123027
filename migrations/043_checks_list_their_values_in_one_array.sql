-- The CHECK constraints of notifications and deliveries that list the values a column may take
-- list them in one array constant, `state = ANY ('{queued,sent,…}')`, rather than `IN (…)`.
--
-- PostgreSQL 15 reads a table's CHECK constraints again, from their stored node text, at every
-- statement that writes the table: the producer's insert, ingest's update of each notification
-- and insert of its deliveries, the record's update. `IN (…)` is stored as an array of one node
-- per value, the array constant as one node; the tables' constraints go from 13 KB of node text
-- to 8 KB. (The lists of herald.jobs and herald.delivery_reports are still written as lists.)
--
-- The constraints keep their names and what they allow. Each is added NOT VALID, as migration
-- 024 added its: dropping and adding a CHECK locks the table against every read and write until
-- this migration commits, and validating would read every partition under that lock to prove
-- what the same check under its old text proved of the rows already there.
--
-- The tables are locked in ingest's order (a notification, then its deliveries), so that this
-- cannot deadlock with a running ingest.
LOCK TABLE herald.notifications, herald.deliveries IN ACCESS EXCLUSIVE MODE;

ALTER TABLE herald.notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_state_check
    CHECK (state = ANY ('{received,accepted,rejected,expired,no_devices,superseded}')) NOT VALID;

ALTER TABLE herald.notifications DROP CONSTRAINT notifications_origin_check;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_origin_check
    CHECK (origin = ANY ('{producer,wakeup}')) NOT VALID;

ALTER TABLE herald.notifications DROP CONSTRAINT "priority must be 'high' or 'normal'";
ALTER TABLE herald.notifications ADD CONSTRAINT "priority must be 'high' or 'normal'"
    CHECK (priority = ANY ('{high,normal}')) NOT VALID;

ALTER TABLE herald.notifications DROP CONSTRAINT "exactly one target: user_ref, device_ids or topic";
ALTER TABLE herald.notifications ADD CONSTRAINT "exactly one target: user_ref, device_ids or topic"
    CHECK (num_nonnulls(user_ref, device_ids, topic) = CASE WHEN activity_event = ANY ('{update,end}') THEN 0 ELSE 1 END)
    NOT VALID;

ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state = ANY ('{queued,sent,validated,delivered,expired,cancelled,token_invalid,failed}')) NOT VALID;

ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind = ANY ('{android_data,android_wakeup,ios_alert,ios_background,ios_wakeup,topic,web,live_activity,'
                               'broadcast,harmony_alert,harmony_background,ios_widgets,ios_voip,ios_location,'
                               'ios_pushtotalk}')) NOT VALID;
