-- What a backend learns about its devices: their state (herald.device_states) and a feed of
-- their changes (herald.changed_devices): a token declared dead, a token moved to another device,
-- a logout, a device enabled again. A trigger on herald.devices writes each change here, whichever
-- function made it, and NOTIFY herald_device_changes (the app's id as payload) tells those who
-- listen. migrations/functions/producers.sql holds the functions.

CREATE TABLE herald.device_changes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id     text NOT NULL,
    device_id  text NOT NULL,
    change     text NOT NULL CHECK (change IN ('token_invalid', 'token_moved', 'logged_out', 'disabled', 'enabled')),
    reason     text,
    token_hint text,
    changed_at timestamptz NOT NULL DEFAULT now(),
    -- The writing transaction: the feed returns changes in the order of their transactions, and
    -- a change only once every older transaction has ended, so a cursor never passes a change
    -- still to commit.
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX device_changes_feed ON herald.device_changes (app_id, xid, id);
CREATE INDEX device_changes_changed ON herald.device_changes (changed_at);
REVOKE ALL ON herald.device_changes FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON herald.device_changes TO herald_daemon;
GRANT SELECT ON herald.device_changes TO herald_operator;

-- Its trigger's function is functions/producers.sql's, made here first (with the file's text)
-- since the trigger names it before that file is applied.
CREATE OR REPLACE FUNCTION herald.record_device_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO herald.device_changes (app_id, device_id, change, reason, token_hint)
    VALUES (NEW.app_id, NEW.device_id,
            CASE NEW.disabled_cause WHEN 'token_invalid' THEN 'token_invalid' WHEN 'token_moved' THEN 'token_moved'
                                    WHEN 'logout' THEN 'logged_out' WHEN 'operator' THEN 'disabled'
                                    ELSE 'enabled' END,
            NEW.disabled_reason, herald.token_hint(coalesce(NEW.push_token, OLD.push_token)));
    PERFORM pg_notify('herald_device_changes', NEW.app_id);
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.record_device_change() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_device_change() TO herald_daemon;
CREATE TRIGGER devices_record_changes AFTER UPDATE OF disabled_at, disabled_cause ON herald.devices
    FOR EACH ROW WHEN (OLD.disabled_cause IS DISTINCT FROM NEW.disabled_cause)
    EXECUTE FUNCTION herald.record_device_change();

COMMENT ON TABLE herald.device_changes IS
    'One row per change of a device''s state that its backend may act on, written by a trigger on herald.devices: a producer reads its apps'' with herald.changed_devices. Pruned by herald.prune_records after the retention.';
COMMENT ON COLUMN herald.device_changes.id IS 'The change''s id, in the order changes were made; with xid, the feed''s cursor.';
COMMENT ON COLUMN herald.device_changes.app_id IS 'The device''s app (herald.apps).';
COMMENT ON COLUMN herald.device_changes.device_id IS 'The producer''s id for the device (herald.devices.device_id).';
COMMENT ON COLUMN herald.device_changes.change IS
    'token_invalid (a provider declared its token dead), token_moved (another device of the app registered its token), logged_out (herald.unregister_device), disabled (by an operator) or enabled (registered again, or herald.enable_device).';
COMMENT ON COLUMN herald.device_changes.reason IS 'Why, in words: the provider''s error, the logout''s reason, the device the token moved to. NULL for enabled.';
COMMENT ON COLUMN herald.device_changes.token_hint IS 'The token it had, as logs show one (herald.token_hint), never the token.';
COMMENT ON COLUMN herald.device_changes.changed_at IS 'When the change was made.';
COMMENT ON COLUMN herald.device_changes.xid IS
    'The transaction that made it: herald.changed_devices returns changes in the order of their transactions, each once every older transaction has ended, so no cursor passes a change that commits late.';
