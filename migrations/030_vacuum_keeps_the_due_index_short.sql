-- Vacuum cleans the due index of the open generation often enough that a claim never walks far.
--
-- Every delivery leaves entries behind in `deliveries_due`: its lease (`run_at`, ingest's lease
-- at birth or a claim's) is an entry at a time still to come, which dies when the delivery is
-- sent. By the time the lease's time has passed, new entries go to pages further on, so the
-- page it is on never fills again and its dead entries are never removed as pages fill; only
-- vacuum removes them. Each claim walks the due index from its start, over every dead entry
-- left since the last vacuum that cleaned the index.
--
-- At autovacuum's defaults, a partition is vacuumed once a fifth of its rows are dead: late in
-- an all-day partition that takes over an hour at 1,000 notifications a second, and each claim
-- walks every entry dead since. A vacuum that finds dead rows on fewer than 2% of the
-- partition's pages also skips its indexes altogether. So each partition of deliveries is
-- vacuumed once a hundredth of its rows are dead, and always cleans its indexes. A vacuum reads
-- every index of the partition whole, so over a day its cost depends on that fraction, not on
-- how big the partition grows: twenty times the default's (measured in docs/benchmarks.md, "The
-- claim stall at the defaults").
--
-- Storage parameters cannot be set on a partitioned table: each partition takes them, and
-- herald.open_generation gives each new one the open generation's.
DO $$
DECLARE
    leaf regclass;
BEGIN
    FOR leaf IN SELECT relid FROM pg_partition_tree('herald.deliveries') WHERE isleaf LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.01, vacuum_index_cleanup = on)', leaf);
    END LOOP;
END
$$;
