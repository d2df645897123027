-- retention: the pruner's statement (Pruner).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Deletes up to `batch` finished notifications created before now() - older_than, with their
-- deliveries (deliveries have no foreign key to cascade through: this deletes them in the same
-- statement) and their processed reports older than that. A notification is finished when it
-- is no longer 'received' and none of its deliveries is still queued. Returns how many
-- notifications it deleted; call it again while it returns `batch`.
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
REVOKE ALL ON FUNCTION herald.prune(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune(interval,integer) TO herald_daemon;
