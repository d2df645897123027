-- Leased at birth (#27): ingest may lease the deliveries it creates to the daemon that ingests
-- them, which hands them straight to its own dispatch, and the dispatch claim reads those it
-- holds beside the ones it claims. Both gain parameters (functions/ingest.sql and dispatch.sql
-- make them again); nothing else changes in the tables.
DROP FUNCTION IF EXISTS herald.ingest_next(integer, timestamp with time zone);
DROP FUNCTION IF EXISTS herald.ingest(bigint[], timestamp with time zone);
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval);
