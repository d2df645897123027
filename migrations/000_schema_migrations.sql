-- 000: where the migrator records what it applied.
--
-- The migrator runs this file before every migration run (it changes nothing once the table
-- exists), then reads the table to see which of the others are missing. Each migration is
-- applied in its own transaction together with its row here; `checksum` is the md5 of the
-- file as applied, so a file edited after it was applied is noticed (and warned about).
CREATE SCHEMA IF NOT EXISTS herald;
CREATE TABLE IF NOT EXISTS herald.schema_migrations (
    version     int PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
