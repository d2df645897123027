-- 016: functions and views have one home each, in migrations/functions/.
--
-- Until 015 each change to a function was a new copy of it in a numbered migration, so the
-- text that runs was the last of up to four copies. From here on a function's (or a view's)
-- current text is its file in migrations/functions/, written as CREATE OR REPLACE with who may
-- call it. `herald migrate` applies the numbered migrations first, then, in one transaction,
-- every function file whose text differs from the one it last applied; this table records
-- the md5 of each file as applied. A database migrated before this migration has no rows, so
-- its first run applies every file, which leaves its schema as it was (the files hold what
-- 000–015 left). migrations/README.md says when a change is a numbered migration instead.
--
-- The daemon reads it (herald run refuses to start while a file is not applied) and cannot
-- change it, as with herald.schema_migrations.
CREATE TABLE herald.schema_functions (
    file        text PRIMARY KEY,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
REVOKE INSERT, UPDATE, DELETE ON herald.schema_functions FROM herald_daemon;
GRANT SELECT ON herald.schema_functions TO herald_daemon;
