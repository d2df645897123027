-- Delivery reports, partitioned with the deliveries they report (#26). A device reports each
-- delivery it shows, so this table grows with the traffic as the deliveries do, and retention
-- deleted it row by row; now a generation's reports are dropped with its deliveries.
--
--   herald.delivery_reports         PARTITION BY LIST (kept)
--     delivery_reports_kept         kept = true: reports not yet applied when their generation
--                                   retired, and reports on a delivery kept out of its
--                                   generation; pruned by DELETE
--     delivery_reports_rotating     kept = false, PARTITION BY RANGE (delivery_id)
--       delivery_reports_g<N>       the reports on generation N's deliveries: delivery ids
--                                   [N << 32, (N + 1) << 32), dropped with them
-- A report goes where its delivery is (herald.report_delivery writes the delivery's `kept`).
-- The reconcile jobs name reports by their own id: the primary key (id, delivery_id, kept) leads
-- with it, one index scan a partition.
--
-- An existing database keeps its rows where they are: the old table becomes the partition of
-- every generation up to the open one (the reports written since migration 020 name deliveries
-- of those), dropped with the open one; a report of an older generation not yet applied is kept
-- when that generation retires. Its primary key and unique constraint gain columns and are built
-- again: the locks last as long as one scan of the table (its range is checked) and two index
-- builds on it.

DROP TRIGGER delivery_reports_enqueue_reconcile ON herald.delivery_reports;
-- It returns how many reports it kept, too (functions/retention.sql makes it again).
DROP FUNCTION IF EXISTS herald.retire_generation(interval);

DO $migrate$
DECLARE
    -- The open generation, or a later one should a report name a delivery past it (its ids ran
    -- over into the generation made ahead).
    last_one int := greatest(
        (SELECT max(generation) FROM herald.generations WHERE opened_at IS NOT NULL),
        ((SELECT coalesce(max(delivery_id), 0) FROM herald.delivery_reports) >> 32)::int);
    boundary bigint := (last_one::bigint + 1) << 32;
    old text := 'delivery_reports_g' || last_one;
    next_id bigint := greatest((SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                                FROM herald.delivery_reports_id_seq),
                               (SELECT coalesce(max(id), 0) + 1 FROM herald.delivery_reports));
    settings text := (SELECT string_agg(o, ', ') FROM pg_class c, unnest(c.reloptions) o
                      WHERE c.oid = 'herald.delivery_reports'::regclass);
    g int;
BEGIN
    ALTER TABLE herald.delivery_reports ALTER COLUMN id DROP IDENTITY;
    ALTER TABLE herald.delivery_reports DROP CONSTRAINT delivery_reports_pkey;
    ALTER TABLE herald.delivery_reports DROP CONSTRAINT delivery_reports_once;
    -- Pruned by age on the kept side only (below); the generations are dropped.
    DROP INDEX herald.delivery_reports_processed;
    ALTER INDEX herald.delivery_reports_unprocessed RENAME TO delivery_reports_unprocessed_old;
    EXECUTE format('ALTER TABLE herald.delivery_reports RENAME TO %I', old);
    EXECUTE format('ALTER TABLE herald.%I ADD COLUMN kept boolean NOT NULL DEFAULT false', old);
    -- Proves the range to ATTACH, which then needs no scan of its own.
    EXECUTE format('ALTER TABLE herald.%I ADD CONSTRAINT in_range CHECK (NOT kept AND delivery_id < %s)', old, boundary);

    EXECUTE format('CREATE SEQUENCE herald.delivery_reports_id_seq AS bigint START %s', next_id);
    EXECUTE format($sql$
        CREATE TABLE herald.delivery_reports (LIKE herald.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY LIST (kept)$sql$, old);
    ALTER TABLE herald.delivery_reports DROP CONSTRAINT in_range;
    ALTER TABLE herald.delivery_reports ALTER COLUMN id SET DEFAULT nextval('herald.delivery_reports_id_seq');
    ALTER SEQUENCE herald.delivery_reports_id_seq OWNED BY herald.delivery_reports.id;
    CREATE TABLE herald.delivery_reports_kept PARTITION OF herald.delivery_reports FOR VALUES IN (true);
    CREATE TABLE herald.delivery_reports_rotating PARTITION OF herald.delivery_reports
        FOR VALUES IN (false) PARTITION BY RANGE (delivery_id);
    EXECUTE format('ALTER TABLE herald.delivery_reports_rotating ATTACH PARTITION herald.%I FOR VALUES FROM (MINVALUE) TO (%s)',
                   old, boundary);
    EXECUTE format('ALTER TABLE herald.%I DROP CONSTRAINT in_range', old);

    ALTER TABLE herald.delivery_reports ADD PRIMARY KEY (id, delivery_id, kept);
    -- A device's report of a delivery counts once (herald.report_delivery's ON CONFLICT).
    ALTER TABLE herald.delivery_reports ADD CONSTRAINT delivery_reports_once UNIQUE (delivery_id, report_kind, kept);
    -- The reconcile worker's claims (the old table's index matches and is attached, not built).
    CREATE INDEX delivery_reports_unprocessed ON herald.delivery_reports (id) WHERE processed_at IS NULL;
    EXECUTE format('ALTER INDEX herald.delivery_reports_unprocessed_old RENAME TO %I', old || '_unprocessed');
    CREATE INDEX delivery_reports_kept_processed ON herald.delivery_reports_kept (processed_at)
        WHERE processed_at IS NOT NULL;

    -- The generations made ahead. Storage parameters an operator gave the old table go to the
    -- new partitions, as migration 020 did for the others; herald.open_generation carries them
    -- on from there.
    FOR g IN SELECT generation FROM herald.generations WHERE generation > last_one ORDER BY 1 LOOP
        EXECUTE format('CREATE TABLE herald.%I PARTITION OF herald.delivery_reports_rotating FOR VALUES FROM (%s) TO (%s)%s',
                       'delivery_reports_g' || g, g::bigint << 32, (g::bigint + 1) << 32,
                       coalesce(' WITH (' || settings || ')', ''));
    END LOOP;
    IF settings IS NOT NULL THEN
        EXECUTE format('ALTER TABLE herald.delivery_reports_kept SET (%s)', settings);
    END IF;
    -- Only the parent is read and written, through its grants.
    EXECUTE format('REVOKE ALL ON herald.%I FROM PUBLIC, herald_producer, herald_operator, herald_daemon', old);
END
$migrate$;

GRANT SELECT, INSERT, UPDATE, DELETE ON herald.delivery_reports TO herald_daemon;
GRANT SELECT, USAGE ON SEQUENCE herald.delivery_reports_id_seq TO herald_daemon;
CREATE TRIGGER delivery_reports_enqueue_reconcile AFTER INSERT ON herald.delivery_reports
    REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION herald.enqueue_reconcile();
