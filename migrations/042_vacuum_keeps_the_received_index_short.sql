-- Vacuum cleans the index of notifications waiting for ingest as often as migration 030 has it
-- clean the due index of deliveries, for the same reason.
--
-- Every notification is written 'received', which puts an entry in its partition's partial index
-- of those waiting (`notifications_received`), and ingest makes it something else a moment
-- later: the entry is dead, on a page nothing inserts into again once newer ids fill the pages
-- after it, so only a vacuum that cleans the indexes removes it. Each ingest picks its batch by
-- walking that index from its start, over every entry dead since then: at autovacuum's default
-- of a fifth of the partition's rows, late in an all-day partition, hours of them for each
-- notification of a trickle.
--
-- So each partition of notifications is vacuumed once a hundredth of its rows are dead, and
-- always cleans its indexes, as each of deliveries is; herald.open_generation gives each new
-- one the open generation's settings.
DO $$
DECLARE
    leaf regclass;
BEGIN
    FOR leaf IN SELECT relid FROM pg_partition_tree('herald.notifications') WHERE isleaf LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.01, vacuum_index_cleanup = on)', leaf);
    END LOOP;
END
$$;
