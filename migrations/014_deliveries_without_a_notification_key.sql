-- 014: deliveries no longer carry a foreign key to their notification.
--
-- The key checked, for every delivery ingest created, that its notification existed: a
-- per-row trigger running a `SELECT … FOR KEY SHARE` on the notification, queued and run at
-- the end of the statement. Measured on the development VM: about 5 µs of the ~35 µs ingest
-- spends on a notification, for nothing, since deliveries are made only by herald.ingest and
-- herald.reconcile from the notification rows they read and lock in the same statement (the
-- same reasoning dropped the key to devices in migration 010). A key would also tie the two
-- tables' partitioning together (docs/scaling.md).
--
-- The key's ON DELETE CASCADE was what removed a pruned notification's deliveries: prune now
-- deletes them itself, in the same statement. The index on notification_id stays; prune, the
-- journey view and reconcile read through it.
ALTER TABLE herald.deliveries DROP CONSTRAINT deliveries_notification_id_fkey;

CREATE OR REPLACE FUNCTION herald.prune(older_than interval DEFAULT interval '7 days', batch int DEFAULT 1000)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - older_than;
    deleted int;
BEGIN
    WITH old AS (
        SELECT n.id
        FROM herald.notifications n
        WHERE n.created_at < cutoff AND n.state <> 'received'
          AND NOT EXISTS (SELECT 1 FROM herald.deliveries d WHERE d.notification_id = n.id AND d.state = 'queued')
        ORDER BY n.created_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), their_deliveries AS (
        DELETE FROM herald.deliveries d USING old WHERE d.notification_id = old.id
    )
    DELETE FROM herald.notifications n USING old WHERE n.id = old.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    DELETE FROM herald.delivery_reports
    WHERE id IN (SELECT id FROM herald.delivery_reports
                 WHERE processed_at < cutoff ORDER BY processed_at LIMIT batch);
    RETURN deleted;
END;
$$;
