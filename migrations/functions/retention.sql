-- retention: the pruner's statement (Pruner).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- One step of a pruning pass: reads the next `batch` notifications by id after `after_id` (a walk
-- of the primary key, so no call reads more than `batch` of them, whatever waits among them: a
-- backlog, scheduled sends) and deletes those created before now() - older_than that are
-- finished, with their deliveries (deliveries have no foreign key to cascade through: this
-- deletes them in the same statement). A notification is finished when it is no longer 'received' and none
-- of its deliveries is still queued: one that is not is left for a later pass. Returns how many
-- notifications it deleted, the last id it read (the next call's `after_id`), and whether the
-- pass is done (it read past the cutoff, or to the end). Each call is a short transaction, so
-- retention never holds back vacuum of the hot tables.
CREATE OR REPLACE FUNCTION herald.prune(
    older_than interval, batch int, after_id bigint, OUT deleted int, OUT last_id bigint, OUT done boolean)
LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - older_than;
    scanned int;
BEGIN
    IF batch < 1 THEN
        RAISE EXCEPTION 'herald.prune: batch must be at least 1, not %', batch;
    END IF;
    SELECT max(w.id), count(*), coalesce(bool_or(w.created_at >= cutoff), false)
    INTO last_id, scanned, done
    FROM (SELECT n.id, n.created_at FROM herald.notifications n WHERE n.id > after_id ORDER BY n.id LIMIT batch) w;
    done := done OR scanned < batch;
    last_id := coalesce(last_id, after_id);
    WITH old AS (
        SELECT n.id
        FROM herald.notifications n
        WHERE n.id > after_id AND n.id <= last_id AND n.created_at < cutoff AND n.state <> 'received'
          AND NOT EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.notification_id = n.id AND d.state = 'queued')
        FOR UPDATE SKIP LOCKED
    ), their_deliveries AS (
        DELETE FROM herald.deliveries d USING old WHERE d.notification_id = old.id
    )
    DELETE FROM herald.notifications n USING old WHERE n.id = old.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
END;
$$;
REVOKE ALL ON FUNCTION herald.prune(interval,integer,bigint) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune(interval,integer,bigint) TO herald_daemon;

-- Deletes up to `batch` delivery reports processed before now() - older_than, the oldest first
-- (through delivery_reports_processed); returns how many. Call it again while it returns `batch`.
CREATE OR REPLACE FUNCTION herald.prune_reports(older_than interval, batch int)
RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM herald.delivery_reports
        WHERE id IN (SELECT id FROM herald.delivery_reports
                     WHERE processed_at < now() - older_than ORDER BY processed_at LIMIT batch)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
REVOKE ALL ON FUNCTION herald.prune_reports(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune_reports(interval,integer) TO herald_daemon;
