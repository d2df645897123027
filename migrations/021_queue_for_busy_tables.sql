-- Retention on a table that is never free (#26): herald.lock_when_free and
-- herald.drop_generation take a `queue_for` interval, so a pass that found no free moment
-- twice may queue for the parent's lock, for a bounded time (functions/retention.sql). A new
-- parameter is a new signature: the old ones are dropped here (a new database has none yet),
-- and the function file makes the new ones.
DROP FUNCTION IF EXISTS herald.drop_generation(integer, text, interval);
DROP FUNCTION IF EXISTS herald.lock_when_free(text, text);
