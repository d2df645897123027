-- notify: the triggers' functions that wake the workers (LISTEN herald_jobs). The triggers
-- themselves are on their tables, in the numbered migrations (001, 010).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- herald.jobs' wake-up: one NOTIFY per kind per inserting statement, with the kind as payload.
-- PostgreSQL folds identical notifications within a transaction, so a producer's
-- transaction sends at most one per kind however many rows and statements it has.
-- Jobs scheduled for later wake nobody; polling finds them.
CREATE OR REPLACE FUNCTION herald.notify_new_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    job_kind text;
BEGIN
    FOR job_kind IN SELECT DISTINCT kind FROM new_jobs WHERE run_at <= now() LOOP
        PERFORM pg_notify('herald_jobs', job_kind);
    END LOOP;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.notify_new_jobs() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.notify_new_jobs() TO herald_daemon;

-- Wake-up: one NOTIFY per inserting statement, with the worker's name (the trigger's argument)
-- as payload, on the channel the job queue uses. PostgreSQL folds identical notifications
-- within a transaction, so a producer's transaction sends at most one however many rows it
-- inserts. The triggers do not look at the rows (a transition table would copy every one of
-- them): a wake-up for rows due later, or already ingested, costs a claim that finds nothing.
-- A statement whose caller knows better names the worker in the transaction's
-- `herald.wakes_itself` setting, and sends the wake-up itself when one is needed
-- (herald.ingest_locked: deliveries leased at birth need none).
CREATE OR REPLACE FUNCTION herald.notify_worker() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('herald.wakes_itself', true) IS DISTINCT FROM TG_ARGV[0] THEN
        PERFORM pg_notify('herald_jobs', TG_ARGV[0]);
    END IF;
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION herald.notify_worker() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.notify_worker() TO herald_daemon;
