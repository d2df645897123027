-- 006: retention, and enabling a device by hand.

-- Deletes up to `batch` finished notifications created before now() - older_than, with their
-- deliveries (and their processed reports older than that). A notification is finished when
-- it is no longer 'received' and none of its deliveries is still queued. Returns how many
-- notifications it deleted; call it again while it returns `batch`.
CREATE FUNCTION herald.prune(older_than interval DEFAULT interval '7 days', batch int DEFAULT 1000)
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
    )
    DELETE FROM herald.notifications n USING old WHERE n.id = old.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    DELETE FROM herald.delivery_reports
    WHERE id IN (SELECT id FROM herald.delivery_reports
                 WHERE processed_at < cutoff ORDER BY processed_at LIMIT batch);
    RETURN deleted;
END;
$$;
REVOKE ALL ON FUNCTION herald.prune(interval, int) FROM PUBLIC;

-- An operator enables a disabled device again, for example after a misconfiguration disabled
-- it wrongly. Refused for a device without a token (it moved away): it must register again.
CREATE FUNCTION herald.enable_device(app text, device text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE herald.devices
    SET disabled_at = NULL, disabled_cause = NULL, disabled_reason = NULL
    WHERE app_id = app AND device_id = device AND push_token IS NOT NULL;
    IF FOUND THEN RETURN true; END IF;
    IF EXISTS (SELECT 1 FROM herald.devices WHERE app_id = app AND device_id = device) THEN
        RAISE EXCEPTION 'herald.enable_device: device % has no push token (it moved to another device); it must register again',
            quote_literal(device) USING ERRCODE = 'check_violation';
    END IF;
    RETURN false;
END;
$$;
REVOKE ALL ON FUNCTION herald.enable_device(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION herald.enable_device(text, text) TO herald_operator;
