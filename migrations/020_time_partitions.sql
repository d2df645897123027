-- Time partitions for the two tables that grow with the traffic (#26). Retention deleted every
-- finished notification and delivery again, one row at a time: as many deletes as inserts, and
-- five dead row versions a notification for vacuum. Now whole partitions are dropped.
--
-- How the tables are cut (docs/scaling.md says why):
--   herald.notifications, herald.deliveries      PARTITION BY LIST (kept)
--     <table>_kept                               kept = true: long-waiting rows, pruned by DELETE
--     <table>_rotating                           kept = false, PARTITION BY RANGE (id)
--       <table>_g<N>                             generation N: ids [N << 32, (N + 1) << 32)
-- A generation is a span of time: the maintenance (herald.open_generation) moves both id
-- sequences to the next generation's first id every HERALD_PARTITION_INTERVAL, so each id says
-- which partition holds its row and a lookup by id reads one generation's index and the kept
-- one's, never every partition's. Once a generation closed longer ago than the retention, its
-- unfinished rows (queued, dead, not yet ingested) move to the kept partition, ids unchanged,
-- and its two partitions are dropped (herald.retire_generation).
--
-- An existing database keeps its rows where they are: each table becomes the first generation
-- (ids from the lowest up to the next multiple of 2^32), attached with its indexes, without
-- being copied. The locks this holds last as long as one scan of each table (its range is
-- checked), the index of the keyed notifications and the copy of their keys; `herald migrate`
-- says how long it took (1.8 s for 2 million notifications and 4 million deliveries).

CREATE TABLE herald.generations (
    generation int PRIMARY KEY,
    first_id   bigint NOT NULL,
    end_id     bigint NOT NULL CHECK (end_id > first_id),
    -- When the id sequences moved into it (NULL: made ahead, not yet in use), and when they
    -- moved on. It is retired once closed_at is older than the retention.
    opened_at  timestamptz,
    closed_at  timestamptz
);
COMMENT ON TABLE herald.generations IS
    'The id ranges herald.notifications and herald.deliveries are partitioned by: one a HERALD_PARTITION_INTERVAL, dropped a retention after it closed';
GRANT SELECT ON herald.generations TO herald_operator, herald_daemon;

-- Idempotency keys: a unique index on a partitioned table must hold its partition key, so
-- (app_id, idempotency_key) is kept unique here, for every partition at once.
CREATE TABLE herald.idempotency_keys (
    app_id          text NOT NULL,
    idempotency_key text NOT NULL,
    notification_id bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (app_id, idempotency_key)
);
CREATE INDEX idempotency_keys_created ON herald.idempotency_keys (created_at);
COMMENT ON TABLE herald.idempotency_keys IS
    'Each app''s idempotency keys and the notification each first named, kept for the retention';
GRANT SELECT, INSERT, DELETE ON herald.idempotency_keys TO herald_daemon;

-- No foreign key may point into a partitioned table; Herald's own functions make these rows
-- from the rows they name.
ALTER TABLE herald.delivery_reports DROP CONSTRAINT delivery_reports_delivery_id_fkey;
ALTER TABLE herald.wakeups DROP CONSTRAINT wakeups_notification_id_fkey;
-- Wake-ups were pruned through that key's cascade; now by age (herald.prune_small_tables).
CREATE INDEX wakeups_created ON herald.wakeups (created_at);

-- The views read the tables by oid: they are dropped here and made again on the parents by
-- functions/operators.sql, which every function file's record being cleared makes apply again.
DROP VIEW IF EXISTS herald.notification_journey, herald.queue_depth, herald.dead_jobs, herald.recent_wakeups,
          herald.throughput;
DELETE FROM herald.schema_functions;

DO $migrate$
DECLARE
    -- The first generation after every id in use: both sequences restart there.
    first_new int := (greatest(
        (SELECT last_value FROM herald.notifications_id_seq),
        (SELECT last_value FROM herald.deliveries_id_seq),
        (SELECT coalesce(max(id), 0) FROM herald.notifications),
        (SELECT coalesce(max(id), 0) FROM herald.deliveries)) >> 32)::int + 1;
    old int := first_new - 1;
    boundary bigint := first_new::bigint << 32;
    t text;
    g int;
BEGIN
    INSERT INTO herald.idempotency_keys (app_id, idempotency_key, notification_id, created_at)
    SELECT app_id, idempotency_key, id, created_at FROM herald.notifications WHERE idempotency_key IS NOT NULL;
    ALTER TABLE herald.notifications DROP CONSTRAINT notifications_app_id_idempotency_key_key;
    -- NOT VALID (rows from before migration 015 may break it), which a partitioned table cannot
    -- hold for one partition and not the others: herald.claim_idempotency_key checks it instead.
    ALTER TABLE herald.notifications DROP CONSTRAINT "idempotency keys starting with herald- are Herald's own";
    DROP INDEX herald.deliveries_one_pending_wakeup;
    DROP TRIGGER notifications_notify_ingest ON herald.notifications;
    DROP TRIGGER deliveries_notify_dispatch ON herald.deliveries;
    DROP POLICY "as privileges allow" ON herald.notifications;
    DROP POLICY "only apps granted in herald.producer_apps" ON herald.notifications;
    DROP POLICY "producers read their apps' rows only" ON herald.notifications;
    ALTER TABLE herald.notifications DISABLE ROW LEVEL SECURITY;

    FOREACH t IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
        -- The old table becomes generation `old`: every id below the boundary.
        EXECUTE format('ALTER TABLE herald.%1$I ALTER COLUMN id DROP IDENTITY', t);
        EXECUTE format('ALTER TABLE herald.%1$I RENAME TO %2$I', t, t || '_g' || old);
        EXECUTE format('ALTER TABLE herald.%1$I ADD COLUMN kept boolean NOT NULL DEFAULT false', t || '_g' || old);
        EXECUTE format('ALTER INDEX herald.%1$I RENAME TO %2$I', t || '_pkey', t || '_g' || old || '_pkey');
        -- Proves the range to ATTACH, which then needs no scan of its own.
        EXECUTE format('ALTER TABLE herald.%1$I ADD CONSTRAINT in_range CHECK (NOT kept AND id < %2$s)', t || '_g' || old, boundary);

        EXECUTE format('CREATE SEQUENCE herald.%1$I AS bigint START %2$s', t || '_id_seq', boundary);
        EXECUTE format($sql$
            CREATE TABLE herald.%1$I (LIKE herald.%2$I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
            PARTITION BY LIST (kept)$sql$, t, t || '_g' || old);
        EXECUTE format('ALTER TABLE herald.%1$I DROP CONSTRAINT in_range', t);
        EXECUTE format('ALTER TABLE herald.%1$I ALTER COLUMN id SET DEFAULT nextval(%2$L)', t, 'herald.' || t || '_id_seq');
        EXECUTE format('ALTER SEQUENCE herald.%1$I OWNED BY herald.%2$I.id', t || '_id_seq', t);
        -- The primary key is id on each side: the parent's would have to hold kept as well, which
        -- would cost every partition a second index, or hide from the planner that id is unique
        -- (its estimates for a partition not yet analyzed rest on that).
        EXECUTE format('CREATE TABLE herald.%1$I PARTITION OF herald.%2$I (PRIMARY KEY (id)) FOR VALUES IN (true)',
                       t || '_kept', t);
        EXECUTE format('CREATE TABLE herald.%1$I PARTITION OF herald.%2$I (PRIMARY KEY (id)) FOR VALUES IN (false) PARTITION BY RANGE (id)',
                       t || '_rotating', t);
        EXECUTE format('ALTER TABLE herald.%1$I ATTACH PARTITION herald.%2$I FOR VALUES FROM (MINVALUE) TO (%3$s)',
                       t || '_rotating', t || '_g' || old, boundary);
        EXECUTE format('ALTER TABLE herald.%1$I DROP CONSTRAINT in_range', t || '_g' || old);
    END LOOP;

    -- The partial indexes, made on the parents: the old tables' own match and are attached, not
    -- built again (they are renamed first, since an index name is the schema's).
    ALTER INDEX herald.notifications_received RENAME TO notifications_received_old;
    CREATE INDEX notifications_received ON herald.notifications (id) WHERE state = 'received';
    EXECUTE format('ALTER INDEX herald.notifications_received_old RENAME TO %I', 'notifications_g' || old || '_received');
    FOREACH t IN ARRAY ARRAY['by_notification', 'dead', 'due', 'retrying', 'unreported'] LOOP
        EXECUTE format('ALTER INDEX herald.%1$I RENAME TO %2$I', 'deliveries_' || t, 'deliveries_' || t || '_old');
    END LOOP;
    CREATE INDEX deliveries_by_notification ON herald.deliveries (notification_id);
    CREATE INDEX deliveries_dead ON herald.deliveries (dead_at) WHERE dead_at IS NOT NULL;
    CREATE INDEX deliveries_due ON herald.deliveries (run_at, id) WHERE state = 'queued';
    CREATE INDEX deliveries_retrying ON herald.deliveries (run_at) WHERE state = 'queued' AND locked_by IS NULL AND attempts > 0;
    CREATE INDEX deliveries_unreported ON herald.deliveries (device_id, sent_at DESC) WHERE state = 'sent';
    FOREACH t IN ARRAY ARRAY['by_notification', 'dead', 'due', 'retrying', 'unreported'] LOOP
        EXECUTE format('ALTER INDEX herald.%1$I RENAME TO %2$I', 'deliveries_' || t || '_old', 'deliveries_g' || old || '_' || t);
    END LOOP;
    -- Was unique; a unique index on a partitioned table must hold (kept, id). The wake-ups'
    -- exclusion constraint keeps one a device a quiet period, and reconcile looks here first.
    CREATE INDEX deliveries_pending_wakeup ON herald.deliveries (device_id) WHERE payload_kind = 'ios_wakeup' AND state = 'queued';

    INSERT INTO herald.generations (generation, first_id, end_id, opened_at, closed_at)
    VALUES (old, -9223372036854775808, boundary, '-infinity', now());
    -- The old tables keep their grants to producers and no row-level security: only the parent
    -- is read and written, through the parent's.
    EXECUTE format('REVOKE ALL ON herald.%1$I, herald.%2$I FROM PUBLIC, herald_producer, herald_operator, herald_daemon',
                   'notifications_g' || old, 'deliveries_g' || old);
    -- A producer looks its notification up by key (its INSERT returned no row): one index scan
    -- per partition, for the keyed rows only.
    CREATE INDEX notifications_by_key ON herald.notifications (app_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
    -- The first new generation, open, and two made ahead.
    FOR g IN first_new .. first_new + 2 LOOP
        FOREACH t IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
            EXECUTE format('CREATE TABLE herald.%1$I PARTITION OF herald.%2$I FOR VALUES FROM (%3$s) TO (%4$s)',
                           t || '_g' || g, t || '_rotating', g::bigint << 32, (g::bigint + 1) << 32);
        END LOOP;
        INSERT INTO herald.generations (generation, first_id, end_id, opened_at)
        VALUES (g, g::bigint << 32, (g::bigint + 1) << 32, CASE WHEN g = first_new THEN now() END);
    END LOOP;
    -- Storage parameters an operator gave the old tables (autovacuum settings) go to the new
    -- partitions and the kept ones; herald.open_generation carries them on from there.
    FOREACH t IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
        PERFORM 1 FROM pg_class c WHERE c.oid = format('herald.%I', t || '_g' || old)::regclass AND c.reloptions IS NOT NULL;
        IF FOUND THEN
            FOR g IN first_new .. first_new + 2 LOOP
                EXECUTE format('ALTER TABLE herald.%1$I SET (%2$s)', t || '_g' || g,
                               (SELECT string_agg(o, ', ') FROM pg_class c, unnest(c.reloptions) o
                                WHERE c.oid = format('herald.%I', t || '_g' || old)::regclass));
            END LOOP;
            EXECUTE format('ALTER TABLE herald.%1$I SET (%2$s)', t || '_kept',
                           (SELECT string_agg(o, ', ') FROM pg_class c, unnest(c.reloptions) o
                            WHERE c.oid = format('herald.%I', t || '_g' || old)::regclass));
        END IF;
    END LOOP;
END
$migrate$;

-- What the old tables had, on the parents.
CREATE TRIGGER notifications_notify_ingest AFTER INSERT ON herald.notifications
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('ingest');
CREATE TRIGGER deliveries_notify_dispatch AFTER INSERT ON herald.deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('dispatch');

-- A new notification's idempotency key is claimed in herald.idempotency_keys before its row is
-- written; a key the app used already skips the row, as ON CONFLICT DO NOTHING did. On the
-- rotating side only, where every new row goes: a row that moves to the kept partition is
-- inserted there anew, and must pass whatever became of its key. The function is made here with
-- its file's text (functions/producers.sql), since the trigger needs it now.
CREATE OR REPLACE FUNCTION herald.claim_idempotency_key() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Refused here first, so that a key another app used tells a producer nothing about it.
    PERFORM herald.check_acts_for(NEW.app_id, 'INSERT INTO herald.notifications');
    IF NEW.origin = 'producer' AND NEW.idempotency_key LIKE 'herald-%' THEN
        RAISE EXCEPTION 'idempotency keys starting with herald- are Herald''s own: send it again with another key'
            USING ERRCODE = 'check_violation';
    END IF;
    INSERT INTO herald.idempotency_keys (app_id, idempotency_key, notification_id, created_at)
    VALUES (NEW.app_id, NEW.idempotency_key, NEW.id, NEW.created_at)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER notifications_idempotency_key BEFORE INSERT ON herald.notifications_rotating
    FOR EACH ROW WHEN (NEW.idempotency_key IS NOT NULL) EXECUTE FUNCTION herald.claim_idempotency_key();

ALTER TABLE herald.notifications ENABLE ROW LEVEL SECURITY;
CREATE POLICY "as privileges allow" ON herald.notifications USING (true) WITH CHECK (true);
CREATE POLICY "only apps granted in herald.producer_apps" ON herald.notifications AS RESTRICTIVE
    FOR INSERT TO herald_producer WITH CHECK (app_id = ANY ((SELECT herald.producer_app_ids())::text[]));
CREATE POLICY "producers read their apps' rows only" ON herald.notifications AS RESTRICTIVE
    FOR SELECT TO herald_producer USING (app_id = ANY ((SELECT herald.producer_app_ids())::text[]));

GRANT SELECT, INSERT, DELETE, UPDATE ON herald.notifications, herald.deliveries TO herald_daemon;
GRANT SELECT, USAGE ON SEQUENCE herald.notifications_id_seq, herald.deliveries_id_seq TO herald_daemon;
-- A producer's INSERT takes its id from the sequence (an identity column did not need this).
GRANT USAGE ON SEQUENCE herald.notifications_id_seq TO herald_producer;
GRANT SELECT (id, app_id, idempotency_key, state, reason) ON herald.notifications TO herald_producer;
GRANT INSERT (app_id, idempotency_key, user_ref, device_ids, topic, title, body, data, image_url, sound, badge,
              android_channel_id, ios_category, ios_thread_id, deep_link, priority, ttl, expires_at,
              collapse_key, send_at, silent, dry_run) ON herald.notifications TO herald_producer;

-- Retention is now herald.retire_generation for the generations and herald.prune_records for the
-- tables outside them; herald.prune keeps its signature and prunes the kept partitions.
DROP FUNCTION IF EXISTS herald.prune_reports(interval, integer);
