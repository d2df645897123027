-- 001: Herald's first schema.
--
-- The migrator has already created the `herald` schema and `herald.schema_migrations`.
-- Everything the four workers need lives here: apps and their devices, notifications as
-- producers sent them, one delivery per notification and device, delivery reports, and
-- the job queue that drives all of it.

-- One row per app that sends through Herald (one Firebase project each).
CREATE TABLE herald.apps (
    app_id            text PRIMARY KEY CHECK (app_id <> ''),
    fcm_project_id    text NOT NULL CHECK (fcm_project_id <> ''),
    -- Path to the service-account JSON file; NULL means GOOGLE_APPLICATION_CREDENTIALS.
    credentials_file  text,
    default_ttl       interval NOT NULL DEFAULT interval '1 day'
                      CHECK (default_ttl >= interval '0' AND default_ttl <= interval '28 days'),
    default_priority  text NOT NULL DEFAULT 'high' CHECK (default_priority IN ('high', 'normal')),
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- One row per app installation. A dead or logged-out device is disabled, never deleted,
-- so that operators can see when and why, and a new registration can enable it again.
CREATE TABLE herald.devices (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id           text NOT NULL REFERENCES herald.apps ON UPDATE CASCADE,
    -- The producer's own stable id for the installation.
    device_id        text NOT NULL CHECK (device_id <> ''),
    platform         text NOT NULL CHECK (platform IN ('android', 'ios')),
    -- An FCM registration token or Firebase Installation ID; NULL once it moved to another device.
    push_token       text CHECK (push_token <> ''),
    user_ref         text,
    disabled_at      timestamptz,
    -- Why, in one word an operator can group by; disabled_reason has the details.
    disabled_cause   text CHECK (disabled_cause IN ('token_invalid', 'logout', 'token_moved', 'operator')),
    disabled_reason  text,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    last_wakeup_at   timestamptz,
    UNIQUE (app_id, device_id),
    UNIQUE (app_id, push_token),
    CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL)),
    CHECK ((disabled_at IS NULL) = (disabled_cause IS NULL)),
    CHECK (push_token IS NOT NULL OR disabled_at IS NOT NULL)
);
CREATE INDEX devices_enabled_by_user ON herald.devices (app_id, user_ref) WHERE disabled_at IS NULL;

-- One row per notification a producer sent, kept with what became of it.
--
-- Producers call herald.send(...) or INSERT here directly, inside their own transactions.
-- Mistakes that are the same on every call (an unknown priority, a TTL out of range, not
-- exactly one target) fail the INSERT at once, through the named constraints below.
-- Problems that depend on the content (reserved data keys, a payload too large, an unknown
-- app, …) never abort the producer's transaction: the row is kept and the ingest worker marks
-- it rejected, with a reason that says what to fix.
--
-- app_id is deliberately not a foreign key, for the same reason.
CREATE TABLE herald.notifications (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    app_id              text NOT NULL,
    -- A second send with the same key (per app) is a no-op.
    idempotency_key     text,
    -- The target: exactly one of these.
    user_ref            text,
    device_ids          text[],
    topic               text,
    -- What to show.
    title               text,
    body                text,
    -- A JSON object of string values; numbers and booleans are converted to strings at ingest.
    data                jsonb,
    image_url           text,
    sound               text,
    badge               int,
    android_channel_id  text,
    ios_category        text,
    ios_thread_id       text,
    deep_link           text,
    -- How to send it. NULL priority and ttl take the app's defaults at ingest.
    priority            text,
    ttl                 interval,
    expires_at          timestamptz,
    collapse_key        text,
    send_at             timestamptz,
    -- A data-only wake-up, shown by nobody.
    silent              boolean NOT NULL DEFAULT false,
    -- Sent with validate_only: FCM checks it, no device gets it.
    dry_run             boolean NOT NULL DEFAULT false,
    -- What became of it.
    state               text NOT NULL DEFAULT 'received'
                        CHECK (state IN ('received', 'accepted', 'rejected', 'expired', 'no_devices')),
    reason              text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    ingested_at         timestamptz,
    UNIQUE (app_id, idempotency_key),
    CONSTRAINT "exactly one target: user_ref, device_ids or topic"
        CHECK (num_nonnulls(user_ref, device_ids, topic) = 1),
    CONSTRAINT "priority must be 'high' or 'normal'" CHECK (priority IN ('high', 'normal')),
    CONSTRAINT "ttl must be between 0 and 28 days" CHECK (ttl >= interval '0' AND ttl <= interval '28 days'),
    CONSTRAINT "give ttl or expires_at, not both" CHECK (ttl IS NULL OR expires_at IS NULL),
    CONSTRAINT "badge must not be negative" CHECK (badge >= 0)
);
CREATE INDEX notifications_received ON herald.notifications (id) WHERE state = 'received';

-- One row per notification and device (or one for a topic send): the unit that is sent.
CREATE TABLE herald.deliveries (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id      bigint NOT NULL REFERENCES herald.notifications ON DELETE CASCADE,
    -- NULL for a topic send, which has no device.
    device_id            bigint REFERENCES herald.devices,
    payload_kind         text NOT NULL
                         CHECK (payload_kind IN ('android_data', 'ios_alert', 'ios_background', 'topic')),
    state                text NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'sent', 'validated', 'delivered', 'expired',
                                          'cancelled', 'token_invalid', 'failed')),
    attempts             int NOT NULL DEFAULT 0,
    -- FCM's message name (projects/<p>/messages/<id>) once sent.
    provider_message_id  text,
    last_error           text,
    -- Every attempt's error, with its time, not only the last one.
    error_history        text[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    sent_at              timestamptz,
    delivered_at         timestamptz,
    seen_at              timestamptz,
    finished_at          timestamptz
);
CREATE INDEX deliveries_by_notification ON herald.deliveries (notification_id);
CREATE INDEX deliveries_by_device ON herald.deliveries (device_id, state);

-- Reports from apps that a delivery arrived (or was seen). Written cheaply by producers or
-- the HTTP endpoint, processed in batches by the reconcile worker.
CREATE TABLE herald.delivery_reports (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The opaque reference the app received in the payload.
    reference     text NOT NULL,
    report_kind   text NOT NULL DEFAULT 'delivered' CHECK (report_kind IN ('delivered', 'seen', 'opened')),
    reported_at   timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz,
    outcome       text
);
CREATE INDEX delivery_reports_unprocessed ON herald.delivery_reports (id) WHERE processed_at IS NULL;

-- The durable job queue, one table for every worker kind.
--
--   ready ──claim──▶ running ──complete──▶ (row deleted)
--     ▲                 │
--     └──retry/rescue───┤
--                       └──last attempt──▶ dead (kept, with last_error, until redriven)
--
-- A claim sets a lease (locked_until); a job whose lease passes belongs to a process that
-- died, and lease rescue returns it to ready with the attempt counted.
CREATE TABLE herald.jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text NOT NULL CHECK (kind <> ''),
    -- The row the job is about (a notification, a delivery, …), when there is one.
    ref           bigint,
    payload       jsonb NOT NULL DEFAULT '{}',
    state         text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'dead')),
    run_at        timestamptz NOT NULL DEFAULT now(),
    attempts      int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts  int NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    locked_by     text,
    locked_until  timestamptz,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    dead_at       timestamptz,
    CHECK ((state = 'running') = (locked_until IS NOT NULL)),
    CHECK ((state = 'dead') = (dead_at IS NOT NULL))
);
-- The claim's index: its equality and ORDER BY columns, over ready rows only.
CREATE INDEX jobs_claim ON herald.jobs (kind, run_at, id) WHERE state = 'ready';
-- Lease rescue scans only running rows.
CREATE INDEX jobs_leases ON herald.jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_dead ON herald.jobs (kind, dead_at) WHERE state = 'dead';

-- Wake-up: one NOTIFY per kind per inserting statement, with the kind as payload.
-- PostgreSQL folds identical notifications within a transaction, so a producer's
-- transaction sends at most one per kind however many rows and statements it has.
-- Jobs scheduled for later wake nobody; polling finds them.
CREATE FUNCTION herald.notify_new_jobs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    job_kind text;
BEGIN
    FOR job_kind IN SELECT DISTINCT kind FROM new_jobs WHERE run_at <= now() LOOP
        PERFORM pg_notify('herald_jobs', job_kind);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_on_insert
    AFTER INSERT ON herald.jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_new_jobs();

-- For operators and `herald status`: how deep each kind's queue is, by state, and how long
-- its oldest ready job has waited.
CREATE VIEW herald.queue_depth AS
SELECT kind,
       count(*) FILTER (WHERE state = 'ready' AND run_at <= now())       AS ready,
       count(*) FILTER (WHERE state = 'ready' AND run_at > now())        AS scheduled,
       count(*) FILTER (WHERE state = 'running')                         AS running,
       count(*) FILTER (WHERE state = 'running' AND locked_until < now()) AS lease_expired,
       count(*) FILTER (WHERE state = 'dead')                            AS dead,
       now() - min(run_at) FILTER (WHERE state = 'ready' AND run_at <= now()) AS oldest_ready_age
FROM herald.jobs
GROUP BY kind;
