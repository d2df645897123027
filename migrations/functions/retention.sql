-- retention: the pruner's statements (Pruner): the generations the hot tables are partitioned by
-- (migration 020), and the deletes that are left for the rows kept out of them.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Makes the generations ahead (`ahead` past the open one) and opens the next one when the open
-- one is `every` old or its ids are spent: both id sequences move to the next generation's
-- first id, so every row made from now on lands in its partitions. Rows that found no partition
-- (the default ones, only if this was not called for a long time) are moved to the kept
-- partitions first, since a partition cannot be made over rows the default one holds. Returns
-- the generation open after the call. One caller at a time (an advisory lock); others return
-- NULL at once. Making a partition locks its parent for an instant: a call that waits for that
-- longer than a second fails, and the next pass tries again.
CREATE OR REPLACE FUNCTION herald.open_generation(every interval, ahead int DEFAULT 2)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1s' AS $$
DECLARE
    open_one herald.generations;
    in_use int;
    next_one int;
    g int;
    t text;
    settings text;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('herald.generations')) THEN
        RETURN NULL;
    END IF;
    -- Rows in the default partitions have ids past every generation made.
    UPDATE herald.notifications SET kept = true WHERE NOT kept AND id >= (SELECT max(end_id) FROM herald.generations);
    UPDATE herald.deliveries SET kept = true WHERE NOT kept AND id >= (SELECT max(end_id) FROM herald.generations);
    SELECT * INTO open_one FROM herald.generations WHERE opened_at IS NOT NULL ORDER BY generation DESC LIMIT 1;
    -- The generation the sequences are in: past the open one when it filled its 2^32 ids.
    in_use := greatest(open_one.generation,
                       (SELECT last_value >> 32 FROM herald.notifications_id_seq),
                       (SELECT last_value >> 32 FROM herald.deliveries_id_seq));
    next_one := CASE WHEN open_one.opened_at + every <= now() OR in_use > open_one.generation
                     THEN in_use + 1 ELSE open_one.generation END;
    -- Only from the one to open: no id will ever fall in a gap the sequences jumped over.
    FOR g IN next_one .. next_one + ahead LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM herald.generations WHERE generation = g);
        FOREACH t IN ARRAY ARRAY['notifications', 'deliveries'] LOOP
            -- Storage parameters cannot be set on the parent: each new partition takes those an
            -- operator gave the open generation's (autovacuum settings).
            SELECT coalesce(' WITH (' || string_agg(format('%s = %L', split_part(o, '=', 1), substr(o, strpos(o, '=') + 1)), ', ') || ')', '')
            INTO settings
            FROM pg_class c, unnest(c.reloptions) o
            WHERE c.oid = to_regclass(format('herald.%I', t || '_g' || open_one.generation));
            EXECUTE format('CREATE TABLE herald.%1$I PARTITION OF herald.%2$I FOR VALUES FROM (%3$s) TO (%4$s)%5$s',
                           t || '_g' || g, t || '_rotating', g::bigint << 32, (g::bigint + 1) << 32, settings);
        END LOOP;
        INSERT INTO herald.generations (generation, first_id, end_id) VALUES (g, g::bigint << 32, (g::bigint + 1) << 32);
    END LOOP;
    IF next_one > open_one.generation THEN
        PERFORM setval('herald.notifications_id_seq', next_one::bigint << 32, false);
        PERFORM setval('herald.deliveries_id_seq', next_one::bigint << 32, false);
        UPDATE herald.generations SET closed_at = now() WHERE generation < next_one AND closed_at IS NULL;
        UPDATE herald.generations SET opened_at = coalesce(opened_at, now()) WHERE generation <= next_one;
    END IF;
    RETURN next_one;
END;
$$;
REVOKE ALL ON FUNCTION herald.open_generation(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.open_generation(interval,integer) TO herald_daemon;

-- Retires the oldest generation that closed more than `older_than` ago: its rows that still wait
-- (deliveries queued or dead, notifications not yet ingested or with such a delivery in any
-- generation) move to the kept partitions with their ids, then its two partitions are dropped.
-- Dropping a partition locks its parent for an instant: a retirement that waits for a lock
-- longer than a second fails, and the next pass tries again. Returns the
-- generation retired (NULL: none was due) and how many rows were kept.
CREATE OR REPLACE FUNCTION herald.retire_generation(
    older_than interval, OUT generation int, OUT kept_notifications int, OUT kept_deliveries int)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '1s' AS $$
DECLARE
    due herald.generations;
    moved int;
BEGIN
    kept_notifications := 0;
    kept_deliveries := 0;
    IF NOT pg_try_advisory_xact_lock(hashtext('herald.generations')) THEN
        RETURN;
    END IF;
    SELECT * INTO due FROM herald.generations g
    WHERE g.closed_at < now() - older_than ORDER BY g.generation LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    generation := due.generation;
    -- Twice: once while others may still write to the generation, then with its partitions locked,
    -- for what changed in between (a redrive, a retry): nothing can change once they are locked.
    FOR pass IN 1 .. 2 LOOP
        IF pass = 2 THEN
            EXECUTE format('LOCK TABLE herald.%1$I, herald.%2$I IN ACCESS EXCLUSIVE MODE',
                           'deliveries_g' || due.generation, 'notifications_g' || due.generation);
        END IF;
        UPDATE herald.deliveries d SET kept = true
        WHERE NOT d.kept AND d.id >= due.first_id AND d.id < due.end_id
          AND (d.state = 'queued' OR d.dead_at IS NOT NULL);
        GET DIAGNOSTICS moved = ROW_COUNT;
        kept_deliveries := kept_deliveries + moved;
        UPDATE herald.notifications n SET kept = true
        WHERE NOT n.kept AND n.id >= due.first_id AND n.id < due.end_id
          AND (n.state = 'received'
               OR n.id IN (SELECT d.notification_id FROM herald.deliveries d
                           WHERE (d.state = 'queued' OR d.dead_at IS NOT NULL)
                             AND d.notification_id >= due.first_id AND d.notification_id < due.end_id));
        GET DIAGNOSTICS moved = ROW_COUNT;
        kept_notifications := kept_notifications + moved;
    END LOOP;
    EXECUTE format('DROP TABLE herald.%1$I, herald.%2$I', 'deliveries_g' || due.generation, 'notifications_g' || due.generation);
    DELETE FROM herald.generations g WHERE g.generation = due.generation;
END;
$$;
REVOKE ALL ON FUNCTION herald.retire_generation(interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.retire_generation(interval) TO herald_daemon;

-- One step of a pass over the kept notifications (the rows that outlived their generation):
-- reads the next `batch` of them by id after `after_id` and deletes those created before
-- now() - older_than that are finished, with their kept deliveries. A notification is finished
-- when it is no longer 'received', none of its deliveries is queued, and none died within the
-- retention (an operator may still redrive it). Returns how many notifications it deleted, the
-- last id it read (the next call's `after_id`), and whether the pass is done. Each call is a short
-- transaction, so retention never holds back vacuum.
CREATE OR REPLACE FUNCTION herald.prune(
    older_than interval, batch int, after_id bigint, OUT deleted int, OUT last_id bigint, OUT done boolean)
LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - older_than;
    scanned int;
BEGIN
    IF batch < 1 THEN
        RAISE EXCEPTION 'herald.prune: batch must be at least 1, not %', batch;
    END IF;
    SELECT max(w.id), count(*) INTO last_id, scanned
    FROM (SELECT n.id FROM herald.notifications n WHERE n.kept AND n.id > after_id ORDER BY n.id LIMIT batch) w;
    done := scanned < batch;
    last_id := coalesce(last_id, after_id);
    WITH old AS (
        SELECT n.id
        FROM herald.notifications n
        WHERE n.kept AND n.id > after_id AND n.id <= last_id AND n.created_at < cutoff AND n.state <> 'received'
          AND NOT EXISTS (SELECT 1 FROM herald.deliveries d
                          WHERE d.notification_id = n.id AND (d.state = 'queued' OR d.dead_at >= cutoff))
        FOR UPDATE SKIP LOCKED
    ), their_deliveries AS (
        DELETE FROM herald.deliveries d USING old WHERE d.kept AND d.notification_id = old.id
    )
    DELETE FROM herald.notifications n USING old WHERE n.kept AND n.id = old.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
END;
$$;
REVOKE ALL ON FUNCTION herald.prune(interval,integer,bigint) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune(interval,integer,bigint) TO herald_daemon;

-- Deletes up to `batch` rows from each table outside the generations that grows with the
-- traffic, oldest first: delivery reports processed before now() - older_than (through
-- delivery_reports_processed), idempotency keys older than that (but for kept notifications,
-- which still need theirs), and wake-ups whose quiet period ended before it. Returns the most it
-- deleted from one table: call it again while that is `batch`.
CREATE OR REPLACE FUNCTION herald.prune_records(older_than interval, batch int)
RETURNS int
LANGUAGE sql AS $$
    WITH reports AS (
        DELETE FROM herald.delivery_reports
        WHERE id IN (SELECT id FROM herald.delivery_reports
                     WHERE processed_at < now() - older_than ORDER BY processed_at LIMIT batch)
        RETURNING 1
    ), keys AS (
        DELETE FROM herald.idempotency_keys k
        WHERE (k.app_id, k.idempotency_key) IN (
            SELECT o.app_id, o.idempotency_key FROM herald.idempotency_keys o
            WHERE o.created_at < now() - older_than
              AND NOT EXISTS (SELECT 1 FROM herald.notifications n WHERE n.kept AND n.id = o.notification_id)
            ORDER BY o.created_at LIMIT batch)
        RETURNING 1
    ), wakeups AS (
        DELETE FROM herald.wakeups
        WHERE id IN (SELECT id FROM herald.wakeups
                     WHERE created_at < now() - older_than AND quiet_until < now() ORDER BY created_at LIMIT batch)
        RETURNING 1
    )
    SELECT greatest((SELECT count(*) FROM reports), (SELECT count(*) FROM keys), (SELECT count(*) FROM wakeups))::int
$$;
REVOKE ALL ON FUNCTION herald.prune_records(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune_records(interval,integer) TO herald_daemon;
