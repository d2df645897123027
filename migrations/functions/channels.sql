-- channels: what the channel worker learns of an app's APNs broadcast channels, and what a
-- broadcast APNs refused tells of its channel. A producer creates and deletes channels
-- (herald.create_channel, herald.delete_channel in producers.sql); the worker makes and deletes
-- them at APNs and records each answer here. A channel's states: creating → active, or failed;
-- deleting → deleted, or failed; a channel deleted while APNs made it goes to deleting, to be
-- deleted at APNs too.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- The channels named, for the worker, with their app's row version (for its setups cache).
CREATE OR REPLACE FUNCTION herald.channels_to_work(ids bigint[])
RETURNS TABLE (id bigint, app_id text, name text, stores_latest boolean, state text, channel_id text,
               app_version text)
LANGUAGE sql STABLE AS $$
    SELECT c.id, c.app_id, c.name, c.stores_latest, c.state, c.channel_id, a.xmin::text
    FROM herald.broadcast_channels c JOIN herald.apps a ON a.app_id = c.app_id
    WHERE c.id = ANY(ids);
$$;
REVOKE ALL ON FUNCTION herald.channels_to_work(bigint[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.channels_to_work(bigint[]) TO herald_daemon;

-- Records what APNs answered for channel `channel`, and returns its state after, or NULL when the
-- answer no longer applies (the channel moved on meanwhile: deleted, failed, or gone). A channel
-- whose row a producer's open transaction holds (herald.delete_channel) is waited for half a
-- second at most, as every worker function waits (docs/architecture.md, "Producers beside the
-- workers"); then the job is tried again later:
-- - 'created': APNs made it as `apns_channel_id`. A channel still being created is active; one
--   the producer deleted meanwhile (it has no APNs id yet) is deleting, since nobody will
--   broadcast on it;
-- - 'deleted': APNs deleted it, or no longer knew it (`reason`, kept when NULL);
-- - 'failed': APNs refused the request for good (`reason`);
-- - 'waiting': the request will be tried again (`reason`: why it failed this time).
CREATE OR REPLACE FUNCTION herald.record_channel_answer(channel bigint, answer text, apns_channel_id text,
    reason text) RETURNS text
LANGUAGE plpgsql SET lock_timeout = '500ms' AS $$
DECLARE
    after text;
BEGIN
    CASE answer
    WHEN 'created' THEN
        UPDATE herald.broadcast_channels c
        SET state = CASE c.state WHEN 'creating' THEN 'active' ELSE 'deleting' END, channel_id = apns_channel_id,
            reason = CASE c.state WHEN 'creating' THEN NULL ELSE c.reason END, changed_at = now()
        WHERE c.id = channel AND (c.state = 'creating' OR (c.state = 'deleted' AND c.channel_id IS NULL))
        RETURNING c.state INTO after;
    WHEN 'deleted' THEN
        UPDATE herald.broadcast_channels c
        SET state = 'deleted', reason = coalesce(record_channel_answer.reason, c.reason), changed_at = now()
        WHERE c.id = channel AND c.state = 'deleting'
        RETURNING c.state INTO after;
    WHEN 'failed', 'waiting' THEN
        UPDATE herald.broadcast_channels c
        SET state = CASE answer WHEN 'failed' THEN 'failed' ELSE c.state END,
            reason = record_channel_answer.reason, changed_at = now()
        WHERE c.id = channel AND c.state IN ('creating', 'deleting')
        RETURNING c.state INTO after;
    ELSE
        RAISE EXCEPTION 'unknown answer for a broadcast channel: %', answer;
    END CASE;
    RETURN after;
END
$$;
REVOKE ALL ON FUNCTION herald.record_channel_answer(bigint,text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_channel_answer(bigint,text,text,text) TO herald_daemon;

-- A broadcast APNs refused because it does not know channel `apns_channel_id` as app `app`'s
-- (deleted elsewhere, or made with another key's bundle): the active channel fails, with APNs'
-- words (`reason`), so that the next broadcasts are refused at ingest instead of each at APNs.
CREATE OR REPLACE FUNCTION herald.fail_unknown_channel(app text, apns_channel_id text, reason text) RETURNS void
LANGUAGE sql SET lock_timeout = '500ms' AS $$
    UPDATE herald.broadcast_channels c SET state = 'failed', reason = fail_unknown_channel.reason, changed_at = now()
    WHERE c.app_id = app AND c.channel_id = apns_channel_id AND c.state = 'active';
$$;
REVOKE ALL ON FUNCTION herald.fail_unknown_channel(text,text,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.fail_unknown_channel(text,text,text) TO herald_daemon;
