-- 003: the producer role.
--
-- herald_producer may register and unregister devices, send notifications (the function or
-- a plain INSERT into herald.notifications) and nothing else: it cannot read devices, tokens
-- or other apps' notifications. Grant it to the application's own login role:
--
--     GRANT herald_producer TO shop_backend;
--
-- Roles belong to the whole cluster, so this migration tolerates one that already exists.

DO $$
BEGIN
    CREATE ROLE herald_producer NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- created by another database's migration, or concurrently
END;
$$;

-- Functions are executable by everyone by default; Herald's are not.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM PUBLIC;

-- The producer's functions run with the schema owner's rights, on a fixed search path, so
-- the producer needs no rights on the tables they touch.
ALTER FUNCTION herald.register_device(text, text, text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION herald.unregister_device(text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION herald.send(text, text, text[], text, text, text, jsonb, text, text, int, text, text, text, text, text,
                           text, interval, timestamptz, text, timestamptz, boolean, boolean)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- The insert trigger queues ingest work on the producer's behalf.
ALTER FUNCTION herald.enqueue_ingest() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION herald.notify_new_jobs() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

GRANT USAGE ON SCHEMA herald TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.register_device(text, text, text, text, text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.unregister_device(text, text, text) TO herald_producer;
GRANT EXECUTE ON FUNCTION herald.send(text, text, text[], text, text, text, jsonb, text, text, int, text, text, text, text,
                                      text, text, interval, timestamptz, text, timestamptz, boolean, boolean)
    TO herald_producer;
-- The plain-SQL path: INSERT only, so a producer cannot read back others' notifications.
GRANT INSERT ON herald.notifications TO herald_producer;
