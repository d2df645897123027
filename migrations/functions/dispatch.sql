-- dispatch: the dispatch worker's claim (DispatchWorker, Sources/HeraldWorkers/Dispatch/), and the FCM quota
-- every daemon draws from (FCMQuota).
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Signatures this file changed (migration 044): herald.claim_sends returns registered_again_at,
-- when a delivery's device registered again since it was made (dispatch cancels it). Dropped
-- here, in the transaction that makes the new one (0.11.0's claim, below), rather than in the
-- numbered migration: between the two every daemon's claim would find none.
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval, bigint[]);

-- A token as logs and views show it (never a whole token: it is enough to send to the device):
-- an FCM or APNs token's first 8 characters; for a Web Push endpoint, which is as secret as a
-- token, its origin and the first 8 characters of its last path segment.
CREATE OR REPLACE FUNCTION herald.token_hint(token text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN token IS NULL THEN NULL
                WHEN token LIKE 'https://%' THEN
                    substring(token FROM '^https://[^/]+') || '/…' || left(substring(token FROM '[^/]*$'), 8) || '…'
                ELSE left(token, 8) || '…' END;
$$;
REVOKE ALL ON FUNCTION herald.token_hint(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.token_hint(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION herald.token_hint(text) TO herald_operator;
GRANT EXECUTE ON FUNCTION herald.token_hint(text) TO herald_daemon;

-- The reference an app reports a delivery with (docs/app-integration.md): base64url of the
-- delivery's and the device's ids and a tag, the first 16 bytes of their HMAC-SHA256 under the
-- secret herald.secrets.report_hmac. Knowing one notification's id does not let anyone forge a
-- report for another, or for another device. The claim makes them and herald.open_reference
-- (reconcile.sql) checks them; nothing else does either. Both use the secret's HMAC pads, which
-- herald.secrets keeps beside it (generated from it: building them costs far more than the two
-- hashes of a tag).

-- HMAC-SHA256's padded keys (RFC 2104), for PostgreSQL's built-in sha256, so no extension is
-- needed: the 64-byte key XOR 0x36 and XOR 0x5c, eight bytes at a time. herald.secrets'
-- generated columns inner_pad and outer_pad call it (migration 032) and keep what it returned:
-- a change to it needs a numbered migration that computes them again
-- (`UPDATE herald.secrets SET value = value`).
CREATE OR REPLACE FUNCTION herald.hmac_pads(key bytea, OUT inner_pad bytea, OUT outer_pad bytea)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH sized AS (SELECT CASE WHEN octet_length(key) > 64 THEN sha256(key) ELSE key END AS k),
         padded AS (SELECT k || decode(repeat('00', 64 - octet_length(k)), 'hex') AS k FROM sized)
    SELECT string_agg(int8send(w.word # x'3636363636363636'::bigint), '' ORDER BY i),
           string_agg(int8send(w.word # x'5c5c5c5c5c5c5c5c'::bigint), '' ORDER BY i)
    FROM padded, generate_series(0, 7) AS i,
         LATERAL (SELECT ('x' || encode(substring(k FROM i * 8 + 1 FOR 8), 'hex'))::bit(64)::bigint AS word) w;
$$;
REVOKE ALL ON FUNCTION herald.hmac_pads(bytea) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.hmac_pads(bytea) TO herald_daemon;

-- A reference's tag of `body` (the two ids, 16 bytes), under the secret's pads.
CREATE OR REPLACE FUNCTION herald.reference_tag(body bytea, inner_pad bytea, outer_pad bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substring(sha256(outer_pad || sha256(inner_pad || body)) FROM 1 FOR 16);
$$;
REVOKE ALL ON FUNCTION herald.reference_tag(bytea,bytea,bytea) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.reference_tag(bytea,bytea,bytea) TO herald_daemon;

-- The reference for one delivery to one device, under the secret's pads. One expression, so
-- that a query calling it inlines it.
CREATE OR REPLACE FUNCTION herald.delivery_reference(delivery_id bigint, device_id bigint, inner_pad bytea,
                                                     outer_pad bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT rtrim(translate(encode(int8send(delivery_id) || int8send(device_id)
                                  || herald.reference_tag(int8send(delivery_id) || int8send(device_id), inner_pad,
                                                          outer_pad), 'base64'), '+/', '-_'), '=');
$$;
REVOKE ALL ON FUNCTION herald.delivery_reference(bigint,bigint,bytea,bytea) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.delivery_reference(bigint,bigint,bytea,bytea) TO herald_daemon;

-- The reference for one delivery to one device.
CREATE OR REPLACE FUNCTION herald.delivery_reference(delivery_id bigint, device_id bigint) RETURNS text
LANGUAGE sql STABLE STRICT AS $$
    SELECT herald.delivery_reference(delivery_id, device_id, s.inner_pad, s.outer_pad)
    FROM herald.secrets s
    WHERE s.name = 'report_hmac';
$$;
REVOKE ALL ON FUNCTION herald.delivery_reference(bigint,bigint) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.delivery_reference(bigint,bigint) TO herald_daemon;

-- The routing rule: the route a delivery takes, by its payload kind and the kind of its device's
-- token (NULL for a topic or a broadcast channel), with the route's provider and the
-- configuration scopes it needs. A pair it has no row for is not sent (the device registered
-- again as another platform since ingest). Every reader of the rule reads it here.
CREATE OR REPLACE VIEW herald.route_rules AS
SELECT t.payload_kind, t.token_kind, r.route, r.provider, r.scopes
FROM herald.route_targets t
JOIN herald.routes r ON r.route = t.route;
REVOKE ALL ON herald.route_rules FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.route_rules TO herald_operator, herald_daemon;
COMMENT ON VIEW herald.route_rules IS
    'The routing rule: the route a delivery takes by its payload kind and token kind, with the route''s provider and the configuration scopes it needs; every reader of the rule reads it here';

-- The dispatch worker's claim: leases up to `batch` deliveries due by `at`, oldest first, to
-- `worker` until `at + lease`, and returns each with everything needed to send it: the
-- notification's content, the device's token and its kind (and why it is disabled, if it is),
-- a browser's subscription keys, the version of its app's row (the daemon reads an app's setup,
-- herald.app_setups, only when that changes), when the device registered again since the
-- delivery was made (for another user, or after a logout: it is not sent), its route
-- (herald.route_targets: NULL when its device's token does not fit its payload) and the latest
-- failure of a configuration that route needs, which holds the delivery back. The lease is run_at itself: a claimed delivery is not due again
-- until its lease ends, so one whose worker died is simply due again then, and the next claim,
-- by any daemon, rescues it (`abandoned_by` names the worker that let it lapse). SKIP LOCKED
-- lets concurrent claimers take disjoint rows. The claim counts as an attempt.
--
-- `held`: deliveries ingest leased at birth to `worker` (herald.ingest), read beside the `batch`
-- claimed ones, in the same shape; their lease and attempt were written when they were created.
-- Ingest hands their ids to its daemon's dispatch (BirthLeases), whose claim reads them so, with
-- a share of the queue or, at a trickle, with no batch at all. A 0.11.0 daemon's ingest still
-- reads its births itself, calling this (as herald.claim_sends) beside herald.ingest_next in its
-- own statement: that it
-- sees the rows ingest wrote in that statement depends on this function being volatile (each
-- statement inside it takes a new snapshot), so it must not be declared stable while 0.11.0 is
-- served.
--
-- The rows it reads are read inside the function, after the lease, so they are as new as the
-- rows it leases: a query around the function would read with its own, older snapshot, and
-- could see a delivery's notification as it was before ingest (seen: without its expiry).
--
-- It must walk deliveries_due in order, stop after `batch` rows, and reach every other row
-- through a primary key, whatever the planner believes: its statistics lag a sudden backlog,
-- and a new generation's partition has none. Believing few deliveries are queued, it would
-- rather read every queued row and sort them, once per claim, or hash a whole table to join the
-- picked rows: either costs a large backlog many times a probe's work for every delivery
-- (docs/benchmarks-history.md). So the function allows no sort, no sequential scan and no hash or merge join: what
-- is left is the due index in order and nested loops of primary-key probes, right at any size.
--
-- Planned once per session (a generic plan, plpgsql's cached one), not at each call: planning
-- its statements over the partitioned tables (the planner probes the due index's end, over the
-- entries of deliveries just sent) cost more than an idle claim's whole work and a small batch's,
-- and at a steady rate kept a core busy. With only index probes and nested loops allowed, a plan made on empty tables stays right
-- as they grow (PlanningTests).
CREATE OR REPLACE FUNCTION herald.claim_batch(at timestamptz, batch integer, worker text, lease interval,
    held bigint[] DEFAULT '{}') RETURNS TABLE (delivery_id bigint, notification_id bigint, payload_kind text,
    attempts integer, abandoned_by text, device_id bigint, push_token text, token_kind text,
    device_disabled_reason text, web_p256dh bytea, web_auth bytea, app_id text, app_version text, route text,
    config_error_at timestamptz, topic text, title text, body text, data text, image_url text, sound text,
    badge integer, android_channel_id text, ios_category text, ios_thread_id text, deep_link text, priority text,
    expires_at timestamptz, collapse_key text, silent boolean, dry_run boolean, ios_interruption_level text,
    ios_relevance_score double precision, ios_filter_criteria text, ios_target_content_id text,
    android_direct_boot_ok boolean, android_proxy text, activity_token text, activity_token_id bigint,
    activity_token_ended text, superseded_by bigint, activity_id text, activity_event text,
    activity_attributes_type text, activity_attributes text, activity_content_state text,
    activity_stale_at timestamptz, activity_dismiss_at timestamptz, activity_event_at timestamptz,
    activity_channel text, channel_id text, channel_state text, channel_stores_latest boolean, report_reference text,
    push_type_token_id bigint, push_type_token_disabled text, registered_again_at timestamptz, message_class text)
LANGUAGE plpgsql SET enable_sort = off SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
    -- The deliveries this call leased, as the lease left them, and who held each before (NULL
    -- for one never leased).
    claimed herald.deliveries[];
    abandoned text[];
BEGIN
    -- An idle claim ends here: starting the statement below opens the partitioned tables and
    -- costs the server the same whatever it finds, and at a steady rate many claims find
    -- nothing (a NOTIFY for deliveries another daemon already took).
    IF cardinality(held) = 0
       AND (batch <= 0 OR NOT EXISTS (SELECT FROM herald.deliveries d WHERE d.state = 'queued' AND d.run_at <= at)) THEN
        RETURN;
    END IF;
    -- Without the report secret no reference can be made: nothing is claimed, and the daemon
    -- says why (herald migrate makes it).
    IF NOT EXISTS (SELECT FROM herald.secrets s WHERE s.name = 'report_hmac') THEN
        RAISE EXCEPTION 'herald.secrets has no report_hmac: run herald migrate' USING ERRCODE = 'undefined_object';
    END IF;
    -- The lease, in a statement of its own, taken only when a batch is asked for: a claim of
    -- births alone asks for none, and starting this statement opens every partition of
    -- herald.deliveries and every index of each, to update none. The rows it leases are handed
    -- on as they are, not read again.
    IF batch > 0 THEN
        WITH picked AS (
            SELECT d.id, d.locked_by AS abandoned_by
            FROM herald.deliveries d
            WHERE d.state = 'queued' AND d.run_at <= at
            ORDER BY d.run_at, d.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), leased AS (
            UPDATE herald.deliveries AS d
            SET run_at = at + lease, locked_by = worker, attempts = d.attempts + 1
            FROM picked
            WHERE d.id = ANY(ARRAY[picked.id])  -- a probe by key, never a join (docs/architecture.md)
            RETURNING d, picked.abandoned_by
        )
        SELECT array_agg(l.d), array_agg(l.abandoned_by) INTO claimed, abandoned FROM leased l;
    END IF;
    RETURN QUERY
    WITH problems AS MATERIALIZED (
        -- The failing configurations and the routing rule, read once per claim (a few rows; there
        -- are usually no problems) rather than by a lookup per delivery, which cost more.
        SELECT p.app_id, p.scope, p.failed_at FROM herald.app_config_problems p
    ), rules AS MATERIALIZED (
        SELECT * FROM herald.route_rules
    ), report_key AS MATERIALIZED (
        SELECT s.inner_pad, s.outer_pad FROM herald.secrets s WHERE s.name = 'report_hmac'
    ), taken AS (
        SELECT c.id, c.notification_id, c.device_id, c.payload_kind, c.attempts,
               abandoned[c.ordinality] AS abandoned_by, c.activity_token_id, c.push_type_token_id, c.created_at
        FROM unnest(claimed) WITH ORDINALITY AS c
        UNION ALL
        -- Leased at birth: read, not written. Only while they are as ingest leased them (their
        -- first attempt: a claim after their lease ran out counts a second, even this daemon's)
        -- and half their lease is left, as a claim's would be: one nearer its end is left to run
        -- out and be claimed anew, so that no other claim can take it while it is sent.
        SELECT d.id, d.notification_id, d.device_id, d.payload_kind, d.attempts, NULL, d.activity_token_id,
               d.push_type_token_id, d.created_at
        FROM herald.deliveries d
        WHERE d.id = ANY(held) AND (d.state = 'queued') IS TRUE AND d.locked_by = worker AND d.attempts = 1
          AND d.run_at > at + lease / 2
          -- A birth given back and leased again by the claim above looks still leased at birth:
          -- it is taken once.
          AND d.id NOT IN (SELECT c.id FROM unnest(claimed) AS c)
    )
    SELECT c.id, c.notification_id, c.payload_kind, c.attempts, c.abandoned_by,
           c.device_id, target.token, target.kind,
           CASE WHEN dev.disabled_at IS NOT NULL THEN coalesce(dev.disabled_reason, 'disabled') END,
           dev.web_p256dh, dev.web_auth,
           n.app_id, n.app_version, r.route, p.failed_at,
           n.topic, n.title, n.body, n.data::text, n.image_url, n.sound, n.badge,
           n.android_channel_id, n.ios_category, n.ios_thread_id, n.deep_link,
           n.priority, n.expires_at, n.collapse_key, n.silent, n.dry_run, n.ios_interruption_level,
           n.ios_relevance_score, n.ios_filter_criteria, n.ios_target_content_id, n.android_direct_boot_ok,
           n.android_proxy,
           -- A Live Activity's: the token it goes to; why that token ended, when no send to it
           -- should go out any more (an ended activity's token still takes the end); the token's
           -- newer delivery, when this one was superseded by a newer event.
           t.token, t.id,
           CASE WHEN t.ended_cause <> 'activity_ended' THEN t.ended_reason END,
           CASE WHEN t.kind = 'update' AND t.last_delivery_id > c.id THEN t.last_delivery_id
                WHEN ch.last_delivery_id > c.id THEN ch.last_delivery_id END,
           n.activity_id, n.activity_event, n.activity_attributes_type,
           -- The app finds the activity's id in its attributes (docs/app-integration.md).
           (n.activity_attributes || jsonb_build_object('herald_activity', n.activity_id))::text,
           n.activity_content_state::text, n.activity_stale_at, n.activity_dismiss_at, n.activity_event_at,
           -- A broadcast's channel, as it is now: APNs' id once made, and its storage policy.
           n.activity_channel, ch.channel_id, ch.state, ch.stores_latest,
           herald.delivery_reference(c.id, c.device_id, k.inner_pad, k.outer_pad),
           c.push_type_token_id, pt.disabled_reason,
           -- A delivery belongs to the registration it was made for: the device registered
           -- again since (for another user, or after a logout) is not sent it.
           CASE WHEN dev.user_ref IS DISTINCT FROM n.user_ref AND n.user_ref IS NOT NULL
                     OR dev.registration_started_at > c.created_at THEN dev.registration_started_at END,
           -- One ingested before migration 48 names none: it takes its app's default.
           coalesce(n.message_class, n.default_message_class)
    -- Everything else a taken delivery needs, by primary key, one probe per row in the order
    -- written: each LATERAL subquery names a column of the row before it, and OFFSET 0 keeps
    -- the planner from pulling it up into a join it could turn inside out (reading a whole
    -- partition of notifications once per claimed delivery; docs/architecture.md, "How the hot
    -- path's statements are planned").
    FROM taken c
    CROSS JOIN LATERAL (
        -- Any change to the app's row gives it a new xmin.
        SELECT n.*, a.xmin::text AS app_version, a.default_message_class
        FROM herald.notifications n
        CROSS JOIN LATERAL (
            SELECT a.xmin, a.default_message_class FROM herald.apps a WHERE a.app_id = n.app_id OFFSET 0) a
        WHERE n.id = c.notification_id OFFSET 0) n
    LEFT JOIN LATERAL (SELECT dev.* FROM herald.devices dev WHERE dev.id = c.device_id OFFSET 0) dev ON true
    LEFT JOIN LATERAL (SELECT t.* FROM herald.activity_tokens t WHERE t.id = c.activity_token_id OFFSET 0) t ON true
    LEFT JOIN LATERAL (SELECT pt.* FROM herald.push_type_tokens pt WHERE pt.id = c.push_type_token_id OFFSET 0) pt
        ON true
    -- What it is sent to: the device's own token, or for a push of another type (herald.send_push)
    -- the device's token of that type.
    CROSS JOIN LATERAL (SELECT CASE WHEN c.push_type_token_id IS NULL THEN dev.push_token ELSE pt.token END AS token,
                               CASE WHEN c.push_type_token_id IS NULL THEN dev.token_kind ELSE pt.token_kind END AS kind
                       ) target
    LEFT JOIN LATERAL (SELECT ch.* FROM herald.broadcast_channels ch WHERE ch.id = n.broadcast_channel_id OFFSET 0) ch
        ON true
    LEFT JOIN LATERAL (SELECT r.* FROM rules r
                       WHERE r.payload_kind = c.payload_kind AND r.token_kind IS NOT DISTINCT FROM target.kind
                       OFFSET 0) r ON true
    LEFT JOIN LATERAL (SELECT max(p.failed_at) AS failed_at FROM problems p
                       WHERE p.app_id = n.app_id AND p.scope = ANY(r.scopes)) p ON true
    LEFT JOIN report_key k ON true;
END;
$$;
REVOKE ALL ON FUNCTION herald.claim_batch(timestamp with time zone,integer,text,interval,bigint[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.claim_batch(timestamp with time zone,integer,text,interval,bigint[]) TO herald_daemon;

-- 0.11.0's claim, for its daemons while the support window serves them: herald.claim_batch
-- without the columns added since (message_class). A daemon prepares its claim as `SELECT *`,
-- and PostgreSQL refuses to run a prepared statement whose result type changed, so a claim
-- that grew in place would fail in every 0.11.0 daemon until its connection ended. (Daemons since
-- prepare such a statement again: PostgresConnection.) The next release drops it.
CREATE OR REPLACE FUNCTION herald.claim_sends(at timestamptz, batch integer, worker text, lease interval,
    held bigint[] DEFAULT '{}') RETURNS TABLE (delivery_id bigint, notification_id bigint, payload_kind text,
    attempts integer, abandoned_by text, device_id bigint, push_token text, token_kind text,
    device_disabled_reason text, web_p256dh bytea, web_auth bytea, app_id text, app_version text, route text,
    config_error_at timestamptz, topic text, title text, body text, data text, image_url text, sound text,
    badge integer, android_channel_id text, ios_category text, ios_thread_id text, deep_link text, priority text,
    expires_at timestamptz, collapse_key text, silent boolean, dry_run boolean, ios_interruption_level text,
    ios_relevance_score double precision, ios_filter_criteria text, ios_target_content_id text,
    android_direct_boot_ok boolean, android_proxy text, activity_token text, activity_token_id bigint,
    activity_token_ended text, superseded_by bigint, activity_id text, activity_event text,
    activity_attributes_type text, activity_attributes text, activity_content_state text,
    activity_stale_at timestamptz, activity_dismiss_at timestamptz, activity_event_at timestamptz,
    activity_channel text, channel_id text, channel_state text, channel_stores_latest boolean, report_reference text,
    push_type_token_id bigint, push_type_token_disabled text, registered_again_at timestamptz)
LANGUAGE sql AS $$
    SELECT c.delivery_id, c.notification_id, c.payload_kind, c.attempts, c.abandoned_by, c.device_id, c.push_token,
           c.token_kind, c.device_disabled_reason, c.web_p256dh, c.web_auth, c.app_id, c.app_version, c.route,
           c.config_error_at, c.topic, c.title, c.body, c.data, c.image_url, c.sound, c.badge, c.android_channel_id,
           c.ios_category, c.ios_thread_id, c.deep_link, c.priority, c.expires_at, c.collapse_key, c.silent,
           c.dry_run, c.ios_interruption_level, c.ios_relevance_score, c.ios_filter_criteria,
           c.ios_target_content_id, c.android_direct_boot_ok, c.android_proxy, c.activity_token,
           c.activity_token_id, c.activity_token_ended, c.superseded_by, c.activity_id, c.activity_event,
           c.activity_attributes_type, c.activity_attributes, c.activity_content_state, c.activity_stale_at,
           c.activity_dismiss_at, c.activity_event_at, c.activity_channel, c.channel_id, c.channel_state,
           c.channel_stores_latest, c.report_reference, c.push_type_token_id, c.push_type_token_disabled,
           c.registered_again_at
    FROM herald.claim_batch(at, batch, worker, lease, held) c;
$$;
REVOKE ALL ON FUNCTION herald.claim_sends(timestamp with time zone,integer,text,interval,bigint[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.claim_sends(timestamp with time zone,integer,text,interval,bigint[]) TO herald_daemon;

-- Records a batch's outcomes (DispatchWorker.record), in one call, so in one transaction:
-- the deliveries, with their leases released; devices whose token or subscription the provider
-- declared dead; Live Activity tokens APNs refused; and the configuration problems found or
-- cleared. Each value is a composite of migrations/031_provider_seam.sql, which says what its
-- fields are.
--
-- Only deliveries still queued change; one left queued for a retry changes only while `worker`
-- holds it, so a lease that ran out and was claimed again is not disturbed. A delivery another
-- session holds locked (a producer's fetch) is waited for half a second at most: then the call
-- fails (55P03), and the caller records each app's outcomes apart.
--
-- `dead_devices` are soft-disabled at `at` (now); one that registered a new token since is left
-- alone, as is one that registered its token after the token's `since`, when known, and one whose
-- row another session holds locked (a producer registering it now, in a transaction it may leave
-- open): its next send finds the token dead again. So are the tokens.
-- `ended_activity_tokens` end as token_invalid at `at` (an ended activity's token too; one the
-- app replaced or dismissed keeps that reason). `ended_push_type_tokens` are disabled as
-- token_invalid, with the same guards as devices' (the device itself stays enabled).
--
-- `problems`: each configuration's problem, or NULL when it works again. A problem found again
-- is confirmed at `at`, so the next probe waits a minute from this one; `since` changes only when
-- the problem does.
--
-- Returns each device it disabled and each token it ended (`ended` is `device`, `activity_token`
-- or `push_type_token`), with its token as logs may show it (herald.token_hint) and the reason: what
-- the daemon logs is what was done.
--
-- Planned once per session, generically, for the reason herald.claim_batch is, and kept to
-- primary-key probes the same way: no sequential scan, no hash or merge join, and
-- `(d.state = 'queued') IS TRUE`, which the partial index of queued deliveries cannot serve (with
-- no statistics that index looks tiny, and a plan reading it end to end for every id took up to
-- 0.5 s after each generation opened, in the soak).
CREATE OR REPLACE FUNCTION herald.record_sends(outcomes herald.send_outcome[], worker text, at timestamptz,
    dead_devices herald.dead_token[], ended_activity_tokens herald.dead_token[], problems herald.config_problem[],
    ended_push_type_tokens herald.dead_token[])
RETURNS TABLE (ended text, id bigint, token_hint text, reason text)
LANGUAGE plpgsql
SET enable_seqscan TO 'off' SET enable_hashjoin TO 'off' SET enable_mergejoin TO 'off'
SET plan_cache_mode TO 'force_generic_plan' SET jit TO 'off' SET lock_timeout TO '500ms'
AS $$
#variable_conflict use_column
BEGIN
    -- A statement for each table, run only when it has something to change: a record is
    -- usually of outcomes alone, and a statement's start opens every table and index it
    -- names, whether or not it has anything to do.
    WITH outcome AS (
        SELECT o.delivery_id AS id, o.state, o.message_name, o.unique_id, o.error,
               to_timestamp(o.answered_at) AS answered_at, to_timestamp(o.due_again) AS next_run, o.given_back,
               o.dead
        FROM unnest(outcomes) AS o
    )
    UPDATE herald.deliveries AS d
    SET state = o.state,
        provider_message_id = coalesce(o.message_name, d.provider_message_id),
        provider_unique_id = coalesce(o.unique_id, d.provider_unique_id),
        -- Sent, a delivery has no error left: what it met before is in error_history.
        last_error = CASE WHEN o.state IN ('sent', 'validated') THEN o.error ELSE coalesce(o.error, d.last_error) END,
        error_history = CASE WHEN o.error IS NULL THEN d.error_history
                             ELSE d.error_history
                                  || format('%s %s', to_char(o.answered_at, 'YYYY-MM-DD HH24:MI:SS'), o.error)
                        END,
        attempts = d.attempts - CASE WHEN o.given_back THEN 1 ELSE 0 END,
        sent_at = CASE WHEN o.state IN ('sent', 'validated') THEN o.answered_at ELSE d.sent_at END,
        finished_at = CASE WHEN o.state <> 'queued' THEN o.answered_at END,
        run_at = CASE WHEN o.state = 'queued' THEN o.next_run END,
        locked_by = NULL,
        dead_at = CASE WHEN o.dead THEN o.answered_at END
    FROM outcome AS o
    WHERE d.id = ANY(ARRAY[o.id]) AND (d.state = 'queued') IS TRUE AND (o.state <> 'queued' OR d.locked_by = worker);
    IF cardinality(dead_devices) > 0 THEN
        RETURN QUERY
        WITH disabled AS (
            UPDATE herald.devices AS dev
            SET disabled_at = at, disabled_cause = 'token_invalid', disabled_reason = u.reason
            FROM unnest(dead_devices) AS u
            WHERE dev.id = ANY(ARRAY[u.id]) AND dev.push_token = u.token AND dev.disabled_at IS NULL
              AND (u.since IS NULL OR dev.registered_at < to_timestamp(u.since))
              AND dev.id = ANY(ARRAY(SELECT free.id FROM herald.devices free WHERE free.id = u.id
                                     FOR NO KEY UPDATE SKIP LOCKED))
            RETURNING 'device'::text, dev.id, herald.token_hint(dev.push_token), dev.disabled_reason
        )
        SELECT * FROM disabled;
    END IF;
    IF cardinality(ended_activity_tokens) > 0 THEN
        RETURN QUERY
        WITH ended_tokens AS (
            UPDATE herald.activity_tokens AS t
            SET ended_at = at, ended_cause = 'token_invalid', ended_reason = u.reason
            FROM unnest(ended_activity_tokens) AS u
            WHERE t.id = ANY(ARRAY[u.id]) AND (t.ended_at IS NULL OR t.ended_cause = 'activity_ended')
              AND t.id = ANY(ARRAY(SELECT free.id FROM herald.activity_tokens free WHERE free.id = u.id
                                   FOR NO KEY UPDATE SKIP LOCKED))
            RETURNING 'activity_token'::text, t.id, herald.token_hint(t.token), t.ended_reason
        )
        SELECT * FROM ended_tokens;
    END IF;
    IF cardinality(ended_push_type_tokens) > 0 THEN
        RETURN QUERY
        WITH ended_push_tokens AS (
            UPDATE herald.push_type_tokens AS t
            SET disabled_at = at, disabled_cause = 'token_invalid', disabled_reason = u.reason
            FROM unnest(ended_push_type_tokens) AS u
            WHERE t.id = ANY(ARRAY[u.id]) AND t.token = u.token AND t.disabled_at IS NULL
              AND (u.since IS NULL OR t.registered_at < to_timestamp(u.since))
              AND t.id = ANY(ARRAY(SELECT free.id FROM herald.push_type_tokens free WHERE free.id = u.id
                                   FOR NO KEY UPDATE SKIP LOCKED))
            RETURNING 'push_type_token'::text, t.id, herald.token_hint(t.token), t.disabled_reason
        )
        SELECT * FROM ended_push_tokens;
    END IF;
    IF cardinality(problems) > 0 THEN
        INSERT INTO herald.app_config_problems AS p (app_id, scope, problem, since, failed_at)
        SELECT u.app_id, u.scope, u.problem, at, at
        FROM unnest(problems) AS u
        WHERE u.problem IS NOT NULL
        ON CONFLICT (app_id, scope) DO UPDATE
        SET problem = excluded.problem, failed_at = excluded.failed_at,
            since = CASE WHEN p.problem = excluded.problem THEN p.since ELSE excluded.since END;
        DELETE FROM herald.app_config_problems AS p
        USING unnest(problems) AS u
        WHERE u.problem IS NULL AND p.app_id = u.app_id AND p.scope = u.scope;
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.record_sends(herald.send_outcome[],text,timestamp with time zone,herald.dead_token[],herald.dead_token[],herald.config_problem[],herald.dead_token[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_sends(herald.send_outcome[],text,timestamp with time zone,herald.dead_token[],herald.dead_token[],herald.config_problem[],herald.dead_token[]) TO herald_daemon;

-- Extends, to `at` (now) + `lease`, the leases `worker` still holds on `deliveries` (a slow
-- route's sends, DispatchWorker); one that ran out and was claimed by another worker is left to
-- it. Rare, so a SQL function, planned at each call; `IS TRUE` keeps it on the primary key
-- (herald.record_sends says why).
CREATE OR REPLACE FUNCTION herald.extend_leases(deliveries bigint[], worker text, at timestamptz, lease interval)
RETURNS void
LANGUAGE sql AS $$
    UPDATE herald.deliveries d SET run_at = at + lease
    WHERE d.id = ANY(deliveries) AND (d.state = 'queued') IS TRUE AND d.locked_by = worker;
$$;
REVOKE ALL ON FUNCTION herald.extend_leases(bigint[],text,timestamp with time zone,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.extend_leases(bigint[],text,timestamp with time zone,interval) TO herald_daemon;

-- Gives back `deliveries` that `worker` holds as ingest leased them at birth, not sent (its
-- dispatch stopped before taking them, BirthLeases): due at `at` (now), for any daemon, with the
-- attempt their lease counted taken back. One claimed again after its lease ran out (a second
-- attempt, perhaps by another loop of this daemon, sending it now) is left alone. Rare, so
-- planned at each call, on the primary key as herald.extend_leases.
CREATE OR REPLACE FUNCTION herald.release_births(deliveries bigint[], worker text, at timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE herald.deliveries d SET run_at = at, locked_by = NULL, attempts = 0
    WHERE d.id = ANY(deliveries) AND (d.state = 'queued') IS TRUE AND d.locked_by = worker AND d.attempts = 1;
$$;
REVOKE ALL ON FUNCTION herald.release_births(bigint[],text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.release_births(bigint[],text,timestamp with time zone) TO herald_daemon;

-- Records that a route of `worker` (app, route, origin or '') had its window full at `at`, with
-- `in_flight` sends out and `postponed` deliveries put off since its last report, for herald
-- status. Two quiet minutes end an episode: the next one starts its own `since` and count. Rows
-- not seen for a day (a route long healthy, a worker long gone) are deleted on the way.
CREATE OR REPLACE FUNCTION herald.record_saturation(app text, route_name text, origin_name text, worker text,
    at timestamptz, in_flight integer, postponed integer) RETURNS void
LANGUAGE sql AS $$
    WITH forgotten AS (
        DELETE FROM herald.route_saturation old WHERE old.seen_at < at - interval '1 day'
    )
    INSERT INTO herald.route_saturation AS s (app_id, route, origin, worker, since, seen_at, in_flight, postponed)
    VALUES (app, route_name, origin_name, worker, at, at, in_flight, postponed)
    ON CONFLICT (app_id, route, origin, worker) DO UPDATE
    SET since = CASE WHEN s.seen_at < excluded.seen_at - interval '2 minutes' THEN excluded.since ELSE s.since END,
        postponed = CASE WHEN s.seen_at < excluded.seen_at - interval '2 minutes' THEN 0 ELSE s.postponed END
                    + excluded.postponed,
        seen_at = excluded.seen_at, in_flight = excluded.in_flight;
$$;
REVOKE ALL ON FUNCTION herald.record_saturation(text,text,text,text,timestamp with time zone,integer,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.record_saturation(text,text,text,text,timestamp with time zone,integer,integer) TO herald_daemon;

-- The setups of the apps named, as the dispatch worker makes their routes from them, with each
-- row's version (as herald.claim_batch returns it): `provider_settings` holds the app's row of
-- each provider's settings (herald.providers.settings), by provider, without its app_id; a
-- provider the app has no row for is left out, and so is a provider whose settings this session
-- cannot read (a table dropped, a grant missing): its routes fail as a configuration problem of
-- their own, and every other provider goes on. Read only when an app's version changes, so the
-- statement is made at each call, over the tables herald.providers names then. The twelve
-- columns between app_version and provider_settings are always NULL, for 0.10.0's daemons during
-- an upgrade: they prepared `SELECT *` of this function, and a prepared statement whose result
-- type changes fails ("cached plan must not change result type") until the connection ends.
-- Daemons since 0.11.0 name the three columns they read; release 0.12.0 drops the twelve.
CREATE OR REPLACE FUNCTION herald.app_setups(apps text[]) RETURNS TABLE (app_id text, app_version text,
    fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text, web_push_hosts text[],
    web_push_private_addresses boolean, apns_environment text, apns_bundle_id text, apns_team_id text,
    apns_key_id text, apns_key_file text, apns_certificate_file text, provider_settings jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    settings text;
BEGIN
    SELECT string_agg(format('%L, (SELECT to_jsonb(s) - ''app_id'' FROM %s s WHERE s.app_id = a.app_id)',
                             p.provider, p.settings), ', ' ORDER BY p.provider)
    INTO settings
    FROM herald.providers p WHERE has_table_privilege(p.settings, 'SELECT') IS TRUE;
    RETURN QUERY EXECUTE format(
        $query$
        SELECT a.app_id, a.xmin::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text[], NULL::boolean,
               NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
               coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(jsonb_build_object(%s)) e
                         WHERE e.value <> 'null'::jsonb), '{}')
        FROM herald.apps a
        WHERE a.app_id = ANY($1)
        $query$, coalesce(settings, '')) USING apps;
END;
$$;
REVOKE ALL ON FUNCTION herald.app_setups(text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.app_setups(text[]) TO herald_daemon;

-- Draws up to `wanted` sends from FCM project `project`'s budget for the current second of the
-- server's clock, which every daemon on the database shares: `fleet_rate` a second, or the
-- project's own per_second when an operator set one (returned as `rate`). Returns how many were
-- granted, the second they belong to and how long it has left: a daemon spends them within it or
-- loses them, never carrying them into the next, so the fleet never draws more than a second's
-- budget for any second. While the project is paused after a 429, nothing is granted and
-- `paused_for` says for how long. The clock is read once the row is locked, so a draw that
-- waited for the lock into the next second draws from that one.
CREATE OR REPLACE FUNCTION herald.draw_fcm_quota(project text, wanted int, fleet_rate int,
    OUT granted int, OUT this_second timestamptz, OUT good_for interval, OUT paused_for interval, OUT rate int)
LANGUAGE plpgsql AS $$
DECLARE
    at timestamptz;
    quota herald.fcm_quotas;
BEGIN
    INSERT INTO herald.fcm_quotas (project_id) VALUES (project) ON CONFLICT DO NOTHING;
    SELECT * INTO quota FROM herald.fcm_quotas q WHERE q.project_id = project FOR UPDATE;
    at := clock_timestamp();
    this_second := date_trunc('second', at);
    good_for := this_second + interval '1 second' - at;
    rate := coalesce(quota.per_second, fleet_rate);
    granted := 0;
    IF quota.paused_until > at THEN
        paused_for := quota.paused_until - at;
    -- A window ahead of this second: the server's clock stepped back; grant nothing until it is past.
    ELSIF quota.window_start <= this_second THEN
        IF quota.window_start < this_second THEN
            quota.drawn := 0;
        END IF;
        granted := greatest(0, least(wanted, rate - quota.drawn));
        IF granted > 0 THEN
            UPDATE herald.fcm_quotas q SET window_start = this_second, drawn = quota.drawn + granted
            WHERE q.project_id = project;
        END IF;
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.draw_fcm_quota(text,integer,integer) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.draw_fcm_quota(text,integer,integer) TO herald_daemon;

-- FCM answered 429 for project `project`: pauses it for every daemon for `pause` from now
-- (never shortening a longer pause already set), keeping FCM's words.
CREATE OR REPLACE FUNCTION herald.pause_fcm_project(project text, pause interval, reason text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO herald.fcm_quotas AS q (project_id, paused_until, paused_reason)
    VALUES (project, clock_timestamp() + pause, reason)
    ON CONFLICT (project_id) DO UPDATE
    SET paused_until = greatest(q.paused_until, excluded.paused_until),
        paused_reason = CASE WHEN excluded.paused_until > q.paused_until THEN excluded.paused_reason
                             ELSE q.paused_reason END;
$$;
REVOKE ALL ON FUNCTION herald.pause_fcm_project(text,interval,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.pause_fcm_project(text,interval,text) TO herald_daemon;
