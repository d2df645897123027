-- 008: the daemon's role.
--
-- herald_daemon has what the workers need and no more: read and write Herald's tables, run
-- its functions, read (not change) the secrets and the migration history. It cannot change
-- the schema: migrations run as the schema's owner (`herald migrate` with an admin's
-- HERALD_DATABASE_URL). Grant it to the daemon's login role:
--
--     CREATE ROLE herald_app LOGIN PASSWORD '…' IN ROLE herald_daemon;

DO $$
BEGIN
    CREATE ROLE herald_daemon NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END;
$$;

GRANT USAGE ON SCHEMA herald TO herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA herald TO herald_daemon;
REVOKE INSERT, UPDATE, DELETE ON herald.secrets, herald.schema_migrations FROM herald_daemon;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA herald TO herald_daemon;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA herald TO herald_daemon;

-- Tables and functions that later migrations add are the daemon's too.
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO herald_daemon;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT USAGE, SELECT ON SEQUENCES TO herald_daemon;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT EXECUTE ON FUNCTIONS TO herald_daemon;
