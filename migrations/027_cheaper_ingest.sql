-- A cheaper ingest (#27): every ingest statement runs on one plan per session, and the batch's
-- rows are locked once. herald.ingest and herald.ingest_next hand what they locked to
-- herald.ingest_locked (functions/ingest.sql); herald.small_ingest, the size below which a
-- batch kept its plan, goes, and so does herald.stringify_data, which nothing has called since
-- ingest converts data in its own walk over the entries.
DROP FUNCTION IF EXISTS herald.small_ingest();
DROP FUNCTION IF EXISTS herald.stringify_data(jsonb);
