-- retention: the pruner's statements (Pruner): the generations the hot tables are partitioned by
-- (migrations 020 and 022: notifications, deliveries, and the deliveries' reports), and the
-- deletes that are left for the rows kept out of them.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Takes a lock (`target` as LOCK TABLE names it, one table or several, all at once or none;
-- `mode` as it says it) without queueing for it:
-- tried with NOWAIT every 5 ms for half a second. A queued ACCESS EXCLUSIVE request stops every
-- statement that comes after it, and a claim that holds a partition's ROW SHARE lock while it
-- asks for its ROW EXCLUSIVE one waits behind it: each would wait for the other until a timeout
-- (measured in the soak: every statement held up half a second at each generation). When the
-- table was never free, it queues for the lock after all if `queue_for` is given, for at most
-- that long: a table under constant load has no free moment, and every statement waits at most
-- `queue_for` behind the request. Raises lock_not_available when it has no lock; the next pass
-- tries again.
CREATE OR REPLACE FUNCTION herald.lock_when_free(target text, mode text, queue_for interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    FOR attempt IN 1 .. 100 LOOP
        BEGIN
            EXECUTE format('LOCK TABLE %s IN %s MODE NOWAIT', target, mode);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.005);
        END;
    END LOOP;
    IF queue_for IS NOT NULL THEN
        -- Until the calling function returns (its own SET lock_timeout is restored then), or its
        -- transaction ends: what it does under the lock waits no longer. At least 1 ms: 0 would
        -- mean no limit.
        PERFORM set_config('lock_timeout', greatest(1, ceil(extract(epoch FROM queue_for) * 1000))::bigint || 'ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE %s IN %s MODE', target, mode);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'herald: % stayed in use for half a second, and its lock did not come in % more in the queue; the next pass tries again', target, queue_for
                USING ERRCODE = 'lock_not_available';
        END;
    END IF;
    RAISE EXCEPTION 'herald: % stayed in use for half a second; the next pass tries again', target
        USING ERRCODE = 'lock_not_available';
END;
$$;
REVOKE ALL ON FUNCTION herald.lock_when_free(text,text,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- Whether this transaction now holds the generations' lock (herald.worker_locks): false at once
-- when another does. Only daemons and these SECURITY DEFINER functions can lock that row, where
-- an advisory lock's key any session could take and hold, stopping retention.
CREATE OR REPLACE FUNCTION herald.lock_generations() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM FROM herald.worker_locks l WHERE l.name = 'generations' FOR UPDATE SKIP LOCKED;
    RETURN FOUND;
END;
$$;
REVOKE ALL ON FUNCTION herald.lock_generations() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;

-- Makes the generations ahead (`ahead` past the open one) and opens the next one when the open
-- one is `every` old or its ids are spent: both id sequences move to the next generation's
-- first id, so every row made from now on lands in its partitions (and every report, which
-- goes by its delivery's id). The sequences only ever move into a generation made already, and
-- a generation holds 2^32 ids: should this not be called for a long time, rows fill the open
-- generation and then the ones made ahead, 4 billion each, before one could find no partition.
-- Returns the generation open after the call. One caller at a time (herald.lock_generations);
-- others return NULL at once. A call that waits more than half a second for a lock fails, and
-- the next pass tries again.
CREATE OR REPLACE FUNCTION herald.open_generation(every interval, ahead int DEFAULT 2)
RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '500ms' AS $$
DECLARE
    open_one herald.generations;
    in_use int;
    next_one int;
    g int;
    t text;
    settings text;
BEGIN
    IF NOT herald.lock_generations() THEN
        RETURN NULL;
    END IF;
    SELECT * INTO open_one FROM herald.generations WHERE opened_at IS NOT NULL ORDER BY generation DESC LIMIT 1;
    -- The generation the sequences are in: past the open one when it filled its 2^32 ids.
    in_use := greatest(open_one.generation,
                       (SELECT last_value >> 32 FROM herald.notifications_id_seq),
                       (SELECT last_value >> 32 FROM herald.deliveries_id_seq));
    next_one := CASE WHEN open_one.opened_at + every <= now() OR in_use > open_one.generation
                     THEN in_use + 1 ELSE open_one.generation END;
    -- Only from the one to open: no id will ever fall in a gap the sequences jumped over. Each
    -- table's partition that is missing is made, even for a generation listed already (made by
    -- a herald that did not know that table).
    FOR g IN next_one .. next_one + ahead LOOP
        FOREACH t IN ARRAY ARRAY['notifications', 'deliveries', 'delivery_reports'] LOOP
            CONTINUE WHEN to_regclass(format('herald.%I', t || '_g' || g)) IS NOT NULL;
            -- Storage parameters cannot be set on the parent: each new partition takes those an
            -- operator gave the open generation's (autovacuum settings).
            SELECT coalesce(' WITH (' || string_agg(format('%s = %L', split_part(o, '=', 1), substr(o, strpos(o, '=') + 1)), ', ') || ')', '')
            INTO settings
            FROM pg_class c, unnest(c.reloptions) o
            WHERE c.oid = to_regclass(format('herald.%I', t || '_g' || open_one.generation));
            -- Made on its own, then attached: CREATE TABLE ... PARTITION OF would lock the parent
            -- against every statement; ATTACH locks it only against other changes to its
            -- partitions.
            EXECUTE format('CREATE TABLE herald.%1$I (LIKE herald.%2$I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)%3$s',
                           t || '_g' || g, t || '_rotating', settings);
            EXECUTE format('ALTER TABLE herald.%1$I ATTACH PARTITION herald.%2$I FOR VALUES FROM (%3$s) TO (%4$s)',
                           t || '_rotating', t || '_g' || g, g::bigint << 32, (g::bigint + 1) << 32);
        END LOOP;
        INSERT INTO herald.generations (generation, first_id, end_id) VALUES (g, g::bigint << 32, (g::bigint + 1) << 32)
        ON CONFLICT DO NOTHING;
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

-- The first step of retiring the oldest generation that closed more than `older_than` ago: its
-- rows that still wait move to the kept partitions with their ids (deliveries queued, or dead
-- within the retention, which an operator may still redrive; notifications not yet ingested, or
-- with such a delivery in any generation; reports not yet applied). Reads partial indexes only,
-- and locks no more than the rows it moves, so dispatch, ingest and reconcile go on meanwhile.
-- Returns the generation (NULL: none is due) and how many rows it kept; herald.drop_generation
-- then drops its partitions.
CREATE OR REPLACE FUNCTION herald.retire_generation(
    older_than interval, OUT generation int, OUT kept_notifications int, OUT kept_deliveries int,
    OUT kept_reports int)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    due herald.generations;
    cutoff timestamptz := now() - older_than;
    moved int;
BEGIN
    IF NOT herald.lock_generations() THEN
        RETURN;
    END IF;
    SELECT * INTO due FROM herald.generations g
    WHERE g.closed_at < cutoff ORDER BY g.generation LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    generation := due.generation;
    UPDATE herald.deliveries d SET kept = true
    WHERE NOT d.kept AND d.id >= due.first_id AND d.id < due.end_id
      AND (d.state = 'queued' OR d.dead_at >= cutoff);
    GET DIAGNOSTICS kept_deliveries = ROW_COUNT;
    UPDATE herald.notifications n SET kept = true
    WHERE NOT n.kept AND n.id >= due.first_id AND n.id < due.end_id AND n.state = 'received';
    GET DIAGNOSTICS kept_notifications = ROW_COUNT;
    UPDATE herald.notifications n SET kept = true
    FROM (SELECT DISTINCT d.notification_id FROM herald.deliveries d
          WHERE (d.state = 'queued' OR d.dead_at >= cutoff)
            AND d.notification_id >= due.first_id AND d.notification_id < due.end_id) w
    WHERE NOT n.kept AND n.id = w.notification_id;
    GET DIAGNOSTICS moved = ROW_COUNT;
    kept_notifications := kept_notifications + moved;
    -- Below the generation too: the reports of the generations before migration 022 share the
    -- partition of the one open then, and one of theirs may not be applied yet.
    UPDATE herald.delivery_reports r SET kept = true
    WHERE NOT r.kept AND r.delivery_id < due.end_id AND r.processed_at IS NULL;
    GET DIAGNOSTICS kept_reports = ROW_COUNT;
END;
$$;
REVOKE ALL ON FUNCTION herald.retire_generation(interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.retire_generation(interval) TO herald_daemon;

-- The second step: drops one table's partition of a generation herald.retire_generation emptied
-- of waiting rows (`hot`: 'deliveries' first, with the deliveries' reports, then
-- 'notifications', each in a transaction of its own), and the generation's row once all are gone
-- (the reports of the generations before migration 022 share one partition, dropped with the
-- last of them). The parents are locked first, as every statement locks them, when no statement
-- is using the tables (herald.lock_when_free, both at once or neither), and the others wait only
-- while it checks the partitions (through their partial indexes) and drops them; when the tables
-- are never free for half a second it queues for the locks for at most `queue_for` (NULL: not at
-- all) and otherwise fails, and the next pass tries again. A row that started waiting since the
-- first step leaves the partitions in place (false) for the next pass to keep.
CREATE OR REPLACE FUNCTION herald.drop_generation(
    generation int, hot text, older_than interval, queue_for interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '500ms' AS $$
DECLARE
    tables text[];
    t text;
    waiting boolean;
BEGIN
    IF hot NOT IN ('deliveries', 'notifications') THEN
        RAISE EXCEPTION 'herald.drop_generation: hot must be deliveries or notifications, not %', hot;
    END IF;
    IF NOT herald.lock_generations() THEN
        RETURN false;
    END IF;
    -- The tables that still have a partition of this generation.
    SELECT array_agg(x) INTO tables
    FROM unnest(CASE hot WHEN 'deliveries' THEN ARRAY['deliveries', 'delivery_reports']
                         ELSE ARRAY['notifications'] END) x
    WHERE to_regclass(format('herald.%I', x || '_g' || generation)) IS NOT NULL;
    IF tables IS NOT NULL THEN
        PERFORM herald.lock_when_free(
            (SELECT string_agg(format('ONLY herald.%I', x || '_rotating'), ', ') FROM unnest(tables) x),
            'ACCESS EXCLUSIVE', queue_for);
        FOREACH t IN ARRAY tables LOOP
            EXECUTE CASE t
                WHEN 'deliveries' THEN format('SELECT EXISTS (SELECT 1 FROM herald.%I WHERE state = %L OR dead_at >= %L)',
                                              t || '_g' || generation, 'queued', now() - older_than)
                WHEN 'notifications' THEN format('SELECT EXISTS (SELECT 1 FROM herald.%I WHERE state = %L)',
                                                 t || '_g' || generation, 'received')
                ELSE format('SELECT EXISTS (SELECT 1 FROM herald.%I WHERE processed_at IS NULL)', t || '_g' || generation)
                END
            INTO waiting;
            IF waiting THEN
                RETURN false;
            END IF;
        END LOOP;
        FOREACH t IN ARRAY tables LOOP
            EXECUTE format('DROP TABLE herald.%I', t || '_g' || generation);
        END LOOP;
    END IF;
    IF to_regclass(format('herald.deliveries_g%s', generation)) IS NULL
       AND to_regclass(format('herald.notifications_g%s', generation)) IS NULL
       AND to_regclass(format('herald.delivery_reports_g%s', generation)) IS NULL THEN
        DELETE FROM herald.generations g WHERE g.generation = drop_generation.generation;
    END IF;
    RETURN true;
END;
$$;
REVOKE ALL ON FUNCTION herald.drop_generation(integer,text,interval,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.drop_generation(integer,text,interval,interval) TO herald_daemon;

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

-- Deletes up to `batch` rows from each table, or kept side, outside the generations that grows
-- with the traffic, oldest first: kept delivery reports processed before now() - older_than
-- (through delivery_reports_kept_processed), idempotency keys older than that whose notification
-- is gone (its generation retired, and it was not kept), wake-ups whose quiet period ended
-- before it, device changes made before it, and FCM's delivery data of days before it. Returns the most it deleted from one table: call it again while that is `batch`.
CREATE OR REPLACE FUNCTION herald.prune_records(older_than interval, batch int)
RETURNS int
LANGUAGE sql AS $$
    WITH reports AS (
        DELETE FROM herald.delivery_reports
        WHERE kept AND id IN (SELECT id FROM herald.delivery_reports
                              WHERE kept AND processed_at < now() - older_than ORDER BY processed_at LIMIT batch)
        RETURNING 1
    ), keys AS (
        -- Only once its notification is gone: below every generation, and not kept.
        DELETE FROM herald.idempotency_keys k
        WHERE (k.app_id, k.idempotency_key) IN (
            SELECT o.app_id, o.idempotency_key FROM herald.idempotency_keys o
            WHERE o.created_at < now() - older_than
              AND o.notification_id < (SELECT min(g.first_id) FROM herald.generations g)
              AND NOT EXISTS (SELECT 1 FROM herald.notifications n WHERE n.kept AND n.id = o.notification_id)
            ORDER BY o.created_at LIMIT batch)
        RETURNING 1
    ), wakeups AS (
        DELETE FROM herald.wakeups
        WHERE id IN (SELECT id FROM herald.wakeups
                     WHERE created_at < now() - older_than AND quiet_until < now() ORDER BY created_at LIMIT batch)
        RETURNING 1
    ), activities AS (
        -- Ended ones after the retention; one never ended once no device can still show it
        -- (iOS ends an activity after 8 hours and removes it 4 hours later), with its tokens.
        DELETE FROM herald.live_activities
        WHERE id IN (SELECT a.id FROM herald.live_activities a
                     WHERE a.ended_at < now() - older_than
                        OR greatest(a.created_at, a.event_at) < now() - greatest(older_than, interval '12 hours')
                     ORDER BY a.id LIMIT batch)
        RETURNING 1
    ), activity_tokens AS (
        DELETE FROM herald.activity_tokens
        WHERE id IN (SELECT t.id FROM herald.activity_tokens t WHERE t.ended_at < now() - older_than
                     ORDER BY t.id LIMIT batch)
        RETURNING 1
    ), push_type_tokens AS (
        -- Disabled ones after the retention: what became of their sends stays with the deliveries.
        DELETE FROM herald.push_type_tokens
        WHERE id IN (SELECT t.id FROM herald.push_type_tokens t WHERE t.disabled_at < now() - older_than
                     ORDER BY t.id LIMIT batch)
        RETURNING 1
    ), changes AS (
        DELETE FROM herald.device_changes
        WHERE id IN (SELECT c.id FROM herald.device_changes c WHERE c.changed_at < now() - older_than
                     ORDER BY c.changed_at LIMIT batch)
        RETURNING 1
    ), fcm_days AS (
        DELETE FROM herald.fcm_delivery_days
        WHERE (app_id, day, analytics_label) IN (
            SELECT f.app_id, f.day, f.analytics_label FROM herald.fcm_delivery_days f
            WHERE f.day < (now() - older_than)::date ORDER BY f.day LIMIT batch)
        RETURNING 1
    )
    SELECT greatest((SELECT count(*) FROM reports), (SELECT count(*) FROM keys), (SELECT count(*) FROM wakeups),
                    (SELECT count(*) FROM activities), (SELECT count(*) FROM activity_tokens),
                    (SELECT count(*) FROM push_type_tokens), (SELECT count(*) FROM changes),
                    (SELECT count(*) FROM fcm_days))::int
$$;
REVOKE ALL ON FUNCTION herald.prune_records(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune_records(interval,integer) TO herald_daemon;

-- Deletes up to `batch` kept deliveries whose notification is gone, finished or dead before
-- now() - older_than: a delivery made in the generation after its notification's (ingested just
-- after the switch) that was kept when its own generation retired, after herald.prune had deleted
-- the notification. Reads the kept deliveries that are not queued; returns how many it deleted.
CREATE OR REPLACE FUNCTION herald.prune_orphans(older_than interval, batch int)
RETURNS int
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM herald.deliveries d
        WHERE d.kept AND d.id IN (
            SELECT k.id FROM herald.deliveries k
            WHERE k.kept AND k.state <> 'queued'
              AND coalesce(k.dead_at, k.finished_at, k.created_at) < now() - older_than
              AND NOT EXISTS (SELECT 1 FROM herald.notifications n WHERE n.id = k.notification_id)
            LIMIT batch)
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
REVOKE ALL ON FUNCTION herald.prune_orphans(interval,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.prune_orphans(interval,integer) TO herald_daemon;
