-- ingest: the ingest worker's statements (IngestWorker), and the limits ingest checks.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- Signatures this file changed (migrations/038_device_stores.sql): herald.ingest_locked,
-- herald.ingest and herald.ingest_next take the catch-up interval, which a previous release's
-- daemon leaves out of the last two (its batches send no catch-up message). Dropped here, in the transaction
-- that makes the new ones, rather than in the numbered migration: between the two a previous
-- release's daemon would find no ingest function, and reject what it ingests.
DROP FUNCTION IF EXISTS herald.ingest_locked(bigint[], boolean, timestamp with time zone, text, interval, integer);
DROP FUNCTION IF EXISTS herald.ingest(bigint[], timestamp with time zone, text, interval, integer);
DROP FUNCTION IF EXISTS herald.ingest_next(integer, timestamp with time zone, text, interval, integer);
-- And herald.ingest_next takes the apps to leave alone (migration 044); a previous release's
-- daemon's call, without them, finds the new one.
DROP FUNCTION IF EXISTS herald.ingest_next(integer, timestamp with time zone, text, interval, integer, interval);

-- The largest payload any provider takes (APNs' VoIP pushes, 5 KiB): ingest rejects data larger
-- than this as it is stored without reading its entries.
CREATE OR REPLACE FUNCTION herald.max_payload_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 5120 $$;
REVOKE ALL ON FUNCTION herald.max_payload_bytes() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.max_payload_bytes() TO herald_daemon;

-- FCM refuses these data keys.
CREATE OR REPLACE FUNCTION herald.is_reserved_data_key(key text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT lower(key) IN ('from', 'message_type') OR lower(key) LIKE 'google.%' OR lower(key) LIKE 'gcm.%';
$$;
REVOKE ALL ON FUNCTION herald.is_reserved_data_key(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.is_reserved_data_key(text) TO herald_daemon;

-- The longest a provider keeps a notification (FCM's android.ttl), and the furthest ahead a
-- notification may be scheduled.
CREATE OR REPLACE FUNCTION herald.max_ttl() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '28 days' $$;
REVOKE ALL ON FUNCTION herald.max_ttl() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.max_ttl() TO herald_daemon;

CREATE OR REPLACE FUNCTION herald.max_schedule() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '1 year' $$;
REVOKE ALL ON FUNCTION herald.max_schedule() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.max_schedule() TO herald_daemon;

-- What is wrong with a Live Activity event, as the reason its notification is rejected; NULL
-- when nothing is. `activity` is the activity it names (NULL for a start, or when unknown);
-- `channel` the broadcast channel it is sent to (NULL when unknown, or not a broadcast).
CREATE OR REPLACE FUNCTION herald.activity_event_problem(n herald.notifications, app herald.apps,
    activity herald.live_activities, channel herald.broadcast_channels, at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN app.app_id IS NULL THEN
            format('unknown app %s: add it to herald.apps, or fix app_id', quote_literal(n.app_id))
        WHEN n.activity_event NOT IN ('start', 'update', 'end') THEN
            format('activity_event must be start, update or end, not %s', quote_literal(left(n.activity_event, 40)))
        WHEN n.activity_channel IS NOT NULL AND channel.id IS NULL THEN
            format('unknown channel %s: create it first', quote_literal(n.activity_channel))
        WHEN channel.state NOT IN ('creating', 'active') THEN
            format('channel %s is %s%s', quote_literal(n.activity_channel), channel.state,
                   coalesce(': ' || channel.reason, ''))
        WHEN n.activity_channel IS NULL AND (coalesce(n.activity_id, '') = '' OR n.activity_id ~ '[[:cntrl:]]'
                                             OR octet_length(n.activity_id) > 256) THEN
            'activity_id must be 1 to 256 bytes without control characters'
        WHEN n.activity_channel IS NULL AND n.activity_event <> 'start' AND activity.id IS NULL THEN
            format('unknown activity %s: start it first, or let the app register its update token',
                   quote_literal(n.activity_id))
        -- An event older than the end is superseded (below), not refused.
        WHEN n.activity_event <> 'start' AND activity.state = 'ended' AND n.activity_event_at >= activity.event_at THEN
            format('activity %s ended at %s: nothing more is sent to it', quote_literal(n.activity_id), activity.ended_at)
        WHEN n.activity_event = 'start' AND num_nonnulls(n.user_ref, n.device_ids) <> 1 THEN
            'a Live Activity starts on a user''s iPhones (user_ref) or on devices named (device_ids)'
        WHEN n.activity_event = 'start' AND coalesce(n.activity_attributes_type, '') !~ '^[A-Za-z_][A-Za-z0-9_.]{0,255}$' THEN
            'attributes_type must name the app''s ActivityAttributes type as Swift spells it'
        WHEN n.activity_event = 'start' AND jsonb_typeof(n.activity_attributes) IS DISTINCT FROM 'object' THEN
            'attributes must be a JSON object: the activity''s ActivityAttributes, as the app decodes them'
        WHEN (n.activity_event <> 'end' OR n.activity_content_state IS NOT NULL)
             AND jsonb_typeof(n.activity_content_state) IS DISTINCT FROM 'object' THEN
            'content_state must be a JSON object: the activity''s ContentState, as the app decodes it'
        WHEN n.activity_event = 'start' AND coalesce(n.title, '') = '' THEN
            'a Live Activity''s start needs a title: Apple announces a new activity with an alert'
        WHEN n.data IS NOT NULL OR n.silent OR n.topic IS NOT NULL THEN
            'a Live Activity event carries content_state, not data, silent or a topic'
        WHEN n.sound ~ '[[:cntrl:]]' THEN 'sound contains a control character; remove it'
        WHEN n.activity_event_at IS NULL OR NOT isfinite(n.activity_event_at) OR NOT isfinite(n.expires_at)
             OR NOT isfinite(n.activity_stale_at)
             OR NOT isfinite(n.activity_dismiss_at) THEN
            'event_at, expires_at, stale_at and dismiss_at must be finite times'
        WHEN n.activity_event_at > at + interval '1 minute' THEN
            format('event_at %s is ahead of the database''s clock (%s), and a device drops an update from the future;'
                   ' leave event_at out to use the time of the call', n.activity_event_at, at)
        WHEN n.expires_at > at + herald.max_ttl() OR n.activity_stale_at > at + herald.max_ttl() THEN
            format('expires_at and stale_at must be within %s', herald.max_ttl())
        WHEN n.activity_dismiss_at > at + interval '4 hours' THEN
            'dismiss_at must be within 4 hours (an ended activity stays on the Lock Screen at most that long), or past to remove it at once'
        WHEN n.ios_relevance_score IN ('NaN', 'Infinity', '-Infinity') THEN
            'relevance_score must be a finite number'
        WHEN size.bytes > size.limit_bytes THEN
            format('the Live Activity''s payload is about %s bytes, %s over APNs'' %s; shorten content_state, attributes or the alert',
                   size.bytes, size.bytes - size.limit_bytes, size.limit_bytes)
    END
    FROM (SELECT octet_length(jsonb_strip_nulls(jsonb_build_object(
                     'event', n.activity_event, 'content-state', n.activity_content_state,
                     'attributes-type', n.activity_attributes_type, 'attributes', n.activity_attributes,
                     'alert', jsonb_build_object('title', n.title, 'body', n.body), 'sound', n.sound))::text)
                 -- timestamp, dates, relevance-score and the quoting; herald_activity in a start's attributes
                 + 120 + CASE WHEN n.activity_event = 'start' THEN 20 + octet_length(n.activity_id) ELSE 0 END AS bytes,
                 CASE WHEN n.activity_channel IS NULL THEN 4096 ELSE 5120 END AS limit_bytes
         ) AS size
$$;
REVOKE ALL ON FUNCTION herald.activity_event_problem(herald.notifications,herald.apps,herald.live_activities,herald.broadcast_channels,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.activity_event_problem(herald.notifications,herald.apps,herald.live_activities,herald.broadcast_channels,timestamp with time zone) TO herald_daemon;

-- Cancels the deliveries named that are still waiting, superseded by `newer` (a newer event
-- for the same token or channel), at `at`; not one a worker holds: it is sending it now.
CREATE OR REPLACE FUNCTION herald.supersede(deliveries bigint[], newer text, at timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE herald.deliveries d
    SET state = 'cancelled', finished_at = at, run_at = NULL, last_error = 'superseded by ' || newer,
        error_history = d.error_history || format('%s superseded by %s', to_char(at, 'YYYY-MM-DD HH24:MI:SS'), newer)
    WHERE d.id = ANY(deliveries) AND d.state = 'queued' AND d.locked_by IS NULL;
$$;
REVOKE ALL ON FUNCTION herald.supersede(bigint[],text,timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.supersede(bigint[],text,timestamp with time zone) TO herald_daemon;

-- Ingests the batch's Live Activity events (herald.start_activity, update_activity,
-- end_activity), one at a time in id order, since each may start, change or end the activity
-- the next one reads; they are few beside the notifications. A start makes the activity and
-- goes to the push-to-start tokens of the user's enabled iPhones for its attributes type. An
-- update or an end goes to the activity's live update tokens, unless the activity already took
-- a newer event (then it ends `superseded`, unsent); each delivery it makes supersedes the
-- token's older one still waiting (cancelled, with the reason), and dispatch cancels an older
-- one it claims later (herald.claim_batch' superseded_by). An end without a content state
-- carries the newest, ends the activity and its update tokens (its deliveries still go). A
-- broadcast is one delivery to its channel, ordered and superseding per channel the same way.
CREATE OR REPLACE FUNCTION herald.ingest_activity_events(ids bigint[], at timestamptz,
    OUT accepted int, OUT rejected int, OUT expired int, OUT no_devices int, OUT superseded int, OUT deliveries int)
LANGUAGE plpgsql AS $$
DECLARE
    n herald.notifications;
    app herald.apps;
    activity herald.live_activities;
    channel herald.broadcast_channels;
    -- The rows of herald.worker_locks of the apps whose events the batch holds.
    app_locks text[];
    delivery bigint;
    verdict text;
    why text;
    expires timestamptz;
    made int;
BEGIN
    accepted := 0; rejected := 0; expired := 0; no_devices := 0; superseded := 0; deliveries := 0;
    -- One ingester at a time works an app's events, the apps in name order: an update sees the
    -- start another ingester committed just before it (in READ COMMITTED each statement reads
    -- what is committed when it starts), and two batches naming the same activities cannot
    -- lock them in opposite orders. The lock is the app's row of herald.worker_locks, which
    -- only daemons can lock (an advisory lock's key any session can take).
    -- A batch without any (the usual one) costs this one look.
    SELECT array_agg(DISTINCT 'live activities of ' || y.app_id ORDER BY 'live activities of ' || y.app_id)
    INTO app_locks FROM herald.notifications y
    WHERE y.id = ANY(ids) AND y.state = 'received' AND y.activity_event IS NOT NULL;
    IF app_locks IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO herald.worker_locks (name) SELECT a FROM unnest(app_locks) AS a ON CONFLICT DO NOTHING;
    PERFORM FROM herald.worker_locks l WHERE l.name = ANY(app_locks) ORDER BY l.name FOR UPDATE;
    FOR n IN SELECT * FROM herald.notifications x
             WHERE x.id = ANY(ids) AND x.state = 'received' AND x.activity_event IS NOT NULL ORDER BY x.id
    LOOP
        SELECT * INTO app FROM herald.apps a WHERE a.app_id = n.app_id;
        activity := NULL;
        channel := NULL;
        IF n.activity_channel IS NOT NULL THEN
            -- The live channel of that name, else the newest (to say what became of it).
            SELECT * INTO channel FROM herald.broadcast_channels c
            WHERE c.app_id = n.app_id AND c.name = n.activity_channel
            ORDER BY c.state IN ('creating', 'active') DESC, c.id DESC LIMIT 1
            FOR UPDATE;
        ELSIF n.activity_event IN ('update', 'end') THEN
            SELECT * INTO activity FROM herald.live_activities a
            WHERE a.app_id = n.app_id AND a.activity_id = n.activity_id FOR UPDATE;
        END IF;
        expires := coalesce(n.expires_at, least(n.created_at, at) + coalesce(n.ttl, app.default_ttl));
        why := herald.activity_event_problem(n, app, activity, channel, at);
        made := 0;
        IF why IS NOT NULL THEN
            verdict := 'rejected';
        ELSIF expires <= at THEN
            verdict := 'expired';
            why := format('expired at %s, before it could be sent', expires);
        ELSIF channel.id IS NOT NULL AND n.activity_event_at < channel.event_at THEN
            verdict := 'superseded';
            why := format('channel %s had taken a newer broadcast (of %s, notification %s): an older one is not sent',
                          quote_literal(n.activity_channel), channel.event_at, channel.last_notification_id);
        ELSIF channel.id IS NOT NULL THEN
            -- One delivery reaches every subscriber; it supersedes the channel's older one still
            -- waiting, as for a token.
            INSERT INTO herald.deliveries (notification_id, payload_kind, run_at) VALUES (n.id, 'broadcast', at)
            RETURNING id INTO delivery;
            PERFORM herald.supersede(ARRAY[channel.last_delivery_id],
                                     format('notification %s, a newer broadcast on its channel', n.id), at);
            UPDATE herald.broadcast_channels c
            SET event_at = n.activity_event_at, last_notification_id = n.id, last_delivery_id = delivery
            WHERE c.id = channel.id;
            made := 1;
            verdict := 'accepted';
        ELSIF n.activity_event = 'start' THEN
            INSERT INTO herald.live_activities AS a (app_id, activity_id, attributes_type, user_ref, started_by,
                                                     content_state, event_at, last_notification_id, stale_at)
            VALUES (n.app_id, n.activity_id, n.activity_attributes_type, n.user_ref, 'producer',
                    n.activity_content_state, n.activity_event_at, n.id, n.activity_stale_at)
            ON CONFLICT (app_id, activity_id) DO NOTHING
            RETURNING * INTO activity;
            IF activity.id IS NULL THEN
                verdict := 'rejected';
                why := format('activity %s exists already, and an activity''s id is used once: start it with a new one',
                                 quote_literal(n.activity_id));
            ELSE
                WITH created AS (
                    INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, activity_token_id, run_at)
                    SELECT n.id, t.device_id, 'live_activity', t.id, at
                    FROM herald.activity_tokens t
                    JOIN herald.devices d ON d.id = t.device_id
                    WHERE d.app_id = n.app_id AND d.disabled_at IS NULL
                      AND (d.user_ref = n.user_ref OR d.device_id = ANY(n.device_ids))
                      AND t.kind = 'push_to_start' AND t.attributes_type = n.activity_attributes_type
                      AND t.ended_at IS NULL
                    ORDER BY t.id
                    RETURNING 1
                )
                SELECT count(*) INTO made FROM created;
                verdict := CASE WHEN made > 0 THEN 'accepted' ELSE 'no_devices' END;
                why := CASE WHEN made = 0 THEN
                              format('no enabled iPhone of %s has a push-to-start token for %s',
                                     coalesce(quote_literal(n.user_ref), 'the devices named'), n.activity_attributes_type)
                          END;
            END IF;
        ELSIF n.activity_event_at < activity.event_at THEN
            verdict := 'superseded';
            why := format('activity %s had taken a newer event (of %s, notification %s): an older one is not sent',
                             quote_literal(n.activity_id), activity.event_at, activity.last_notification_id);
        ELSE
            UPDATE herald.live_activities a
            SET content_state = coalesce(n.activity_content_state, a.content_state), event_at = n.activity_event_at,
                last_notification_id = n.id, stale_at = coalesce(n.activity_stale_at, a.stale_at),
                dismiss_at = n.activity_dismiss_at,
                state = CASE WHEN n.activity_event = 'end' THEN 'ended' ELSE a.state END,
                ended_at = CASE WHEN n.activity_event = 'end' THEN at END
            WHERE a.id = activity.id
            RETURNING * INTO activity;
            WITH tokens AS MATERIALIZED (
                SELECT t.id, t.device_id, t.last_delivery_id
                FROM herald.activity_tokens t
                JOIN herald.devices d ON d.id = t.device_id
                WHERE t.live_activity_id = activity.id AND t.kind = 'update' AND t.ended_at IS NULL
                  AND d.disabled_at IS NULL
                FOR UPDATE OF t
            ), created AS (
                INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, activity_token_id, run_at)
                SELECT n.id, t.device_id, 'live_activity', t.id, at FROM tokens t ORDER BY t.id
                RETURNING id, activity_token_id
            ), newest AS (
                UPDATE herald.activity_tokens t SET last_delivery_id = c.id
                FROM created c WHERE t.id = c.activity_token_id
            ), older AS (
                SELECT herald.supersede(ARRAY(SELECT t.last_delivery_id FROM tokens t),
                                        format('notification %s, a newer event of its activity', n.id), at)
            )
            SELECT count(*) INTO made FROM created, older;
            IF n.activity_event = 'end' THEN
                UPDATE herald.activity_tokens t
                SET ended_at = at, ended_cause = 'activity_ended',
                    ended_reason = format('its activity ended (notification %s)', n.id)
                WHERE t.live_activity_id = activity.id AND t.ended_at IS NULL;
            END IF;
            verdict := CASE WHEN made > 0 THEN 'accepted' ELSE 'no_devices' END;
            why := CASE WHEN made = 0 THEN
                          format('activity %s has no update token yet: its newest event goes to each one registered later',
                                 quote_literal(n.activity_id))
                      END;
        END IF;
        IF activity.id IS NOT NULL THEN
            INSERT INTO herald.activity_events (live_activity_id, notification_id) VALUES (activity.id, n.id)
            ON CONFLICT DO NOTHING;
        END IF;
        -- One write of the event: its verdict, the channel it went to, and an end's content state
        -- when it gave none (the activity's newest).
        UPDATE herald.notifications x
        SET state = verdict, reason = why, ingested_at = at,
            expires_at = CASE WHEN verdict = 'rejected' THEN x.expires_at ELSE expires END,
            ttl = CASE WHEN verdict = 'rejected' THEN x.ttl END,
            broadcast_channel_id = CASE WHEN made > 0 THEN channel.id END,
            activity_content_state = CASE WHEN verdict IN ('accepted', 'no_devices') AND activity.id IS NOT NULL
                                          THEN coalesce(x.activity_content_state, activity.content_state)
                                          ELSE x.activity_content_state END
        WHERE x.id = n.id;
        CASE verdict
            WHEN 'accepted' THEN accepted := accepted + 1;
            WHEN 'rejected' THEN rejected := rejected + 1;
            WHEN 'expired' THEN expired := expired + 1;
            WHEN 'no_devices' THEN no_devices := no_devices + 1;
            ELSE superseded := superseded + 1;
        END CASE;
        deliveries := deliveries + made;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest_activity_events(bigint[],timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.ingest_activity_events(bigint[],timestamp with time zone) TO herald_daemon;

-- Ingests the batch's pushes of APNs' other types (herald.send_push), one at a time: they are
-- few beside the notifications. Each is checked against its type's rules (herald.push_types)
-- and goes to the push type tokens of the user's enabled devices (or the devices named), one
-- delivery each, all straight to APNs, so the app needs its APNs setup.
CREATE OR REPLACE FUNCTION herald.ingest_push_types(ids bigint[], at timestamptz,
    OUT accepted int, OUT rejected int, OUT expired int, OUT no_devices int, OUT deliveries int)
LANGUAGE plpgsql AS $$
DECLARE
    n herald.notifications;
    app herald.apps;
    type_row herald.push_types;
    data_problem text;
    converted jsonb;
    run_at timestamptz;
    expires timestamptz;
    why text;
    verdict text;
    made int;
BEGIN
    accepted := 0; rejected := 0; expired := 0; no_devices := 0; deliveries := 0;
    FOR n IN SELECT * FROM herald.notifications x
             WHERE x.id = ANY(ids) AND x.state = 'received' AND x.push_type IS NOT NULL ORDER BY x.id
    LOOP
        SELECT * INTO app FROM herald.apps a WHERE a.app_id = n.app_id;
        SELECT * INTO type_row FROM herald.push_types p WHERE p.push_type = n.push_type;
        -- As the notifications' ingest converts and checks data; it goes at the payload's top
        -- level, beside Herald's keys (which win), so `aps` is APNs'.
        SELECT CASE WHEN jsonb_typeof(n.data) = 'object'
                    THEN coalesce(jsonb_object_agg(e.key, CASE WHEN jsonb_typeof(e.value) IN ('number', 'boolean')
                                                               THEN to_jsonb(e.value #>> '{}') ELSE e.value END),
                                  '{}') END,
               (array_agg(CASE WHEN jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean') THEN
                                   format('data value for key %s is a JSON %s; data values must be strings (numbers and booleans are converted)',
                                          quote_literal(e.key), jsonb_typeof(e.value))
                               ELSE 'data key ''aps'' is APNs'' own; rename it' END)
                FILTER (WHERE jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean') OR e.key = 'aps'))[1]
        INTO converted, data_problem
        FROM jsonb_each(CASE WHEN jsonb_typeof(n.data) = 'object'
                                   AND pg_column_size(n.data) <= herald.max_payload_bytes() THEN n.data END) AS e;
        run_at := greatest(at, coalesce(n.send_at, at));
        -- As for notifications: a ttl counts from when it is to be sent (a scheduled one's send_at).
        expires := coalesce(n.expires_at,
                            greatest(least(n.created_at, at), least(coalesce(n.send_at, '-infinity'), at + herald.max_schedule()))
                            + coalesce(n.ttl, type_row.default_ttl, app.default_ttl));
        why := CASE
            WHEN app.app_id IS NULL THEN
                format('unknown app %s: add it to herald.apps, or fix app_id', quote_literal(n.app_id))
            WHEN type_row.push_type IS NULL THEN
                format('push_type %s is not one of herald.push_types', quote_literal(n.push_type))
            WHEN NOT EXISTS (SELECT FROM herald.app_apns s WHERE s.app_id = n.app_id AND s.bundle_id IS NOT NULL
                             AND (s.key_file IS NOT NULL OR s.certificate_file IS NOT NULL)) THEN
                format('app %s has no APNs setup: %s pushes go straight to APNs with the app''s bundle id and APNs key or certificate (herald.app_apns)',
                       quote_literal(n.app_id), n.push_type)
            WHEN NOT isfinite(n.expires_at) OR NOT isfinite(n.send_at) THEN
                format('%s must be a finite time', CASE WHEN NOT isfinite(n.expires_at) THEN 'expires_at' ELSE 'send_at' END)
            WHEN n.send_at > at + herald.max_schedule() THEN
                format('send_at %s is more than %s ahead; schedule it nearer', n.send_at, herald.max_schedule())
            WHEN n.device_ids IS NOT NULL AND cardinality(n.device_ids) = 0 THEN
                'device_ids is empty: name at least one device'
            WHEN NOT type_row.takes_data AND n.data IS NOT NULL AND n.data <> '{}' THEN
                format('%s pushes carry no data: %s only learns that something changed', n.push_type, type_row.description)
            WHEN pg_column_size(n.data) > herald.max_payload_bytes() THEN
                format('data is %s bytes, more than any provider''s payload takes (%s bytes); shorten it',
                       pg_column_size(n.data), herald.max_payload_bytes())
            WHEN n.data IS NOT NULL AND jsonb_typeof(n.data) <> 'object' THEN
                format('data must be a JSON object of strings, not a JSON %s', jsonb_typeof(n.data))
            WHEN data_problem IS NOT NULL THEN data_problem
            WHEN expires > run_at + type_row.max_ttl THEN
                format('a %s push may be tried for %s at most (ttl or expires_at): %s', n.push_type, type_row.max_ttl,
                       type_row.max_ttl_reason)
            -- Herald's keys (herald_notification_id, herald_report and its URL) take about 300.
            WHEN octet_length(converted::text) + 300 > type_row.max_payload_bytes THEN
                format('payload is about %s bytes once encoded, %s over APNs'' %s-byte limit for %s pushes; shorten the data',
                       octet_length(converted::text) + 300, octet_length(converted::text) + 300 - type_row.max_payload_bytes,
                       type_row.max_payload_bytes, n.push_type)
        END;
        made := 0;
        IF why IS NOT NULL THEN
            verdict := 'rejected';
        ELSIF expires <= run_at THEN
            verdict := 'expired';
            why := format('expired at %s, before it could be sent', expires);
        ELSE
            WITH created AS (
                INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, push_type_token_id, run_at)
                SELECT n.id, d.id, type_row.payload_kind, t.id, run_at
                FROM herald.devices d
                JOIN herald.push_type_tokens t ON t.device_id = d.id
                WHERE d.app_id = n.app_id AND d.disabled_at IS NULL
                  AND (d.user_ref = n.user_ref OR d.device_id = ANY(n.device_ids))
                  AND t.token_kind = type_row.token_kind AND t.disabled_at IS NULL
                ORDER BY d.id
                RETURNING 1
            )
            SELECT count(*) INTO made FROM created;
            verdict := CASE WHEN made > 0 THEN 'accepted' ELSE 'no_devices' END;
            why := CASE WHEN made = 0 THEN
                          format('no enabled device of %s has a %s token registered',
                                 coalesce('user ' || quote_literal(n.user_ref), 'the devices named'), n.push_type)
                      END;
        END IF;
        -- A rejected push keeps what the producer wrote; the others get the defaults.
        UPDATE herald.notifications x
        SET state = verdict, reason = why, ingested_at = at,
            priority = CASE WHEN verdict = 'rejected' THEN x.priority ELSE coalesce(x.priority, 'high') END,
            expires_at = CASE WHEN verdict = 'rejected' THEN x.expires_at ELSE expires END,
            ttl = CASE WHEN verdict = 'rejected' THEN x.ttl END,
            data = CASE WHEN verdict = 'rejected' THEN x.data ELSE converted END
        WHERE x.id = n.id;
        CASE verdict
            WHEN 'accepted' THEN accepted := accepted + 1;
            WHEN 'rejected' THEN rejected := rejected + 1;
            WHEN 'expired' THEN expired := expired + 1;
            ELSE no_devices := no_devices + 1;
        END CASE;
        deliveries := deliveries + made;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest_push_types(bigint[],timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.ingest_push_types(bigint[],timestamp with time zone) TO herald_daemon;

-- The store a device's provider keeps for it while it is offline, by its token's kind: how many
-- of its unreported messages Herald lets the provider hold (herald.routes.device_store_capacity)
-- and the provider as operators read it. No row: no bounded store.
CREATE OR REPLACE FUNCTION herald.device_store(token_kind text, OUT capacity integer, OUT provider text)
RETURNS SETOF record
LANGUAGE sql STABLE AS $$
    SELECT r.device_store_capacity, r.description
    FROM herald.route_targets t JOIN herald.routes r USING (route)
    WHERE t.token_kind = device_store.token_kind AND r.device_store_capacity IS NOT NULL
    ORDER BY r.device_store_capacity LIMIT 1
$$;
REVOKE ALL ON FUNCTION herald.device_store(text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.device_store(text) TO herald_daemon;

-- How many of each device's messages its provider holds for it, as Herald counts them: the
-- deliveries counted in its store (stored_until) that are queued, or sent and not reported, and
-- have not expired. Not those sent before the device last reported (`last_reported_at`): the
-- device was online then, and the provider handed it what it held, whether or not the app
-- reported each (an app may not report its silent messages, say). A device with none has no row.
--
-- One scan of the store's index for all of `devices` (a statement's call per device cost as
-- much again as the rest of a batch), planned once per session, generically.
CREATE OR REPLACE FUNCTION herald.stored_messages(devices bigint[], at timestamptz)
RETURNS TABLE (device_id bigint, messages bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET jit = off AS $$
BEGIN
    RETURN QUERY
    SELECT s.device_id, count(*)
    FROM herald.deliveries s
    WHERE s.device_id = ANY(devices) AND s.state IN ('queued', 'sent') AND s.stored_until > at
      AND (s.sent_at IS NULL
           OR s.sent_at > (SELECT coalesce(dev.last_reported_at, '-infinity') FROM herald.devices dev
                           WHERE dev.id = s.device_id))
    GROUP BY s.device_id;
END;
$$;
REVOKE ALL ON FUNCTION herald.stored_messages(bigint[],timestamp with time zone) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.stored_messages(bigint[],timestamp with time zone) TO herald_daemon;

-- Locks `devices`' rows, under which their stores at their providers are counted, filled,
-- released and fetched from (herald.fill_device_stores, the release in herald.reconcile,
-- herald.missed_notifications), until the transaction ends: a statement begun after it sees
-- every delivery another holder of the lock made. In the order of their ids, so two callers
-- cannot deadlock. Row locks live in the rows, not in the server's shared lock table, which a
-- batch of hundreds of devices would fill; FOR NO KEY UPDATE leaves the foreign keys' checks
-- free.
CREATE OR REPLACE FUNCTION herald.lock_device_stores(devices bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM herald.devices d WHERE d.id = ANY(devices) ORDER BY d.id FOR NO KEY UPDATE;
END;
$$;
REVOKE ALL ON FUNCTION herald.lock_device_stores(bigint[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.lock_device_stores(bigint[]) TO herald_daemon;

-- Keeps each device's store at its provider within its route's capacity
-- (herald.routes.device_store_capacity), after ingest counted the deliveries `stored` in their
-- devices' stores (FCM keeps at most 100 messages for an offline phone, and past that drops
-- them all). Under each device's lock (herald.lock_device_stores), held to the commit, a
-- statement of its own counts what the store holds (herald.stored_messages), this batch's and
-- every other ingester's deliveries: so no two batches can fill the same room. What is over
-- the capacity waits in Herald, the newest of this batch first: held, due at its expiry (when
-- the claim ends it expired), with the reason in last_error. A report from the device releases
-- it (herald.reconcile); a fetch marks it delivered.
--
-- A device that has deliveries held gets one catch-up message, Android's wake-up: a silent,
-- collapsible data message (payload kind android_wakeup, collapse key herald_catch_up) that
-- makes the app fetch what it missed. At most one per device per `catch_up_every` (the
-- reconcile worker's wake-up interval, HERALD_WAKEUP_INTERVAL), across all daemons (the
-- exclusion constraint on herald.wakeups), and each expires by the end of its interval, so FCM
-- never holds two. NULL: none is sent (a previous release's daemon).
--
-- Returns how many deliveries it held.
CREATE OR REPLACE FUNCTION herald.fill_device_stores(stored bigint[], at timestamptz, catch_up_every interval)
RETURNS integer
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET jit = off AS $$
DECLARE
    devices bigint[];
    held integer;
    full_device record;
    wakeup_id bigint;
    new_notification bigint;
BEGIN
    SELECT array_agg(DISTINCT d.device_id) INTO devices FROM herald.deliveries d WHERE d.id = ANY(stored);
    PERFORM herald.lock_device_stores(devices);
    WITH filled AS (
        SELECT store.device_id, store.messages - cap.capacity AS excess, cap.capacity, cap.provider
        FROM herald.stored_messages(devices, at) store
        CROSS JOIN LATERAL (SELECT dev.token_kind FROM herald.devices dev WHERE dev.id = store.device_id OFFSET 0) dev
        CROSS JOIN LATERAL herald.device_store(dev.token_kind) cap
        WHERE store.messages > cap.capacity
    ), newest AS (
        SELECT d.id, f.excess, f.capacity, f.provider,
               row_number() OVER (PARTITION BY d.device_id ORDER BY d.id DESC) AS rank
        FROM filled f
        CROSS JOIN LATERAL (SELECT d.id, d.device_id FROM herald.deliveries d
                            WHERE d.id = ANY(stored) AND d.device_id = f.device_id OFFSET 0) d
    )
    UPDATE herald.deliveries d
    SET held_since = at, run_at = d.stored_until, stored_until = NULL, locked_by = NULL, attempts = 0,
        last_error = format('held: %s''s store for this device holds %s messages the app has not reported, the most Herald lets it hold; sent once the app reports, or marked delivered when it fetches them',
                            n.provider, n.capacity)
    FROM newest n
    WHERE d.id = ANY(ARRAY[n.id]) AND n.rank <= n.excess AND d.state = 'queued';
    GET DIAGNOSTICS held = ROW_COUNT;
    IF held = 0 OR catch_up_every IS NULL THEN
        RETURN held;
    END IF;

    FOR full_device IN
        SELECT dev.id, dev.app_id, dev.device_id, count(*) AS waiting
        FROM herald.devices dev
        CROSS JOIN LATERAL (SELECT h.id FROM herald.deliveries h
                            WHERE h.device_id = dev.id AND h.state = 'queued' AND h.sent_at IS NULL
                              AND h.held_since IS NOT NULL
                            OFFSET 0) h
        WHERE dev.id = ANY(devices)
        GROUP BY dev.id
        ORDER BY dev.id
    LOOP
        INSERT INTO herald.wakeups (device_id, missed, created_at, quiet_until)
        VALUES (full_device.id, full_device.waiting, at, at + catch_up_every)
        ON CONFLICT DO NOTHING
        RETURNING id INTO wakeup_id;
        CONTINUE WHEN wakeup_id IS NULL;
        INSERT INTO herald.notifications (app_id, device_ids, silent, priority, expires_at, collapse_key, origin,
                                          state, reason, ingested_at, idempotency_key)
        VALUES (full_device.app_id, ARRAY[full_device.device_id], true, 'normal', at + catch_up_every,
                'herald_catch_up', 'wakeup', 'accepted',
                format('catch-up: %s notifications held while the device''s store at the provider is full',
                       full_device.waiting),
                at, 'herald-wakeup-' || wakeup_id)
        RETURNING id INTO new_notification;
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at)
        VALUES (new_notification, full_device.id, 'android_wakeup', at);
        UPDATE herald.wakeups SET notification_id = new_notification WHERE id = wakeup_id;
        UPDATE herald.devices SET last_wakeup_at = at WHERE id = full_device.id;
    END LOOP;
    RETURN held;
END;
$$;
REVOKE ALL ON FUNCTION herald.fill_device_stores(bigint[],timestamp with time zone,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.fill_device_stores(bigint[],timestamp with time zone,interval) TO herald_daemon;

-- Ingests a batch of notifications the caller has locked (herald.ingest, herald.ingest_next):
-- rejects bad ones with their reason (range and character checks on what the producer gave,
-- naming the field), fills in the app's defaults, expires what is already past its expiry, and
-- creates one delivery per enabled device (or one for a topic), queued in place (run_at) at
-- send_at or now, then keeps the stores of the devices it counted deliveries for within their
-- capacity (herald.fill_device_stores, with `catch_up_every`). Only notifications still
-- 'received' are touched, so running it twice changes nothing. `with_activities` says whether any of them is a Live Activity event or a push of
-- another type (herald.send_push).
--
-- Leased at birth: given `lease_to`, the first `reserve` deliveries due now are created leased
-- to it until `at + lease_for`, as a claim would lease them (their first attempt), and
-- `leased` lists them. The ingesting daemon hands them to its own dispatch, which sends them
-- without a claim's write; any daemon claims them if that lease runs out.
--
-- One statement reads the batch, checks and converts each row's data in a single walk over its
-- entries, creates the deliveries and writes each row once (rewriting each row three times and
-- a check per row were two thirds of the database's work at 100,000 notifications). SQL
-- functions with sub-selects are never inlined, so the checks are written into the statement.
--
-- Every statement of ingest runs on one plan per session, made once without knowing the tables
-- (plan_cache_mode), and kept to primary-key and index probes in nested loops (the SET
-- clauses), so that it reads only its batch at any size: a plan made for a new deployment's
-- first small table would otherwise read the whole grown table once per notification of every
-- batch (ingest fell to 200 a second at 2,500 in the soak; PlanningTests). Planning at every
-- call cost a fifth of ingest at 500 notifications a batch, and more than the work itself at
-- ten. The bounds of the batch's ids let the executor leave out the generations' partitions that
-- cannot hold them before it reads any, and each row is written back through its own
-- partition (kept and id), found while the plan runs.
--
-- JIT is off in these functions (and the claim's, the record's and the reconcile's): with
-- sequential scans off, a read of a few rows that has no index to take (herald.platforms, read
-- whole) is estimated so costly that PostgreSQL compiled it, which took longer than the ingest.
CREATE OR REPLACE FUNCTION herald.ingest_locked(ids bigint[], with_activities boolean, at timestamptz, lease_to text,
    lease_for interval, reserve integer, catch_up_every interval) RETURNS TABLE (accepted integer, rejected integer,
    expired integer, no_devices integer, superseded integer, deliveries integer, leased bigint[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET jit = off SET enable_sort = on AS $$
DECLARE
    activities record;
    first_id bigint;
    last_id bigint;
    -- What a notification becomes for a device of each platform (herald.platforms), read once.
    platform_names text[];
    payload_kinds text[];
    silent_payload_kinds text[];
    -- The payload and token kinds whose route keeps a bounded store per device, as 'kind/token'.
    stored_kinds text[];
    -- The counts, and the deliveries counted in a device's store.
    result record;
BEGIN
    -- Live Activity events and other push types first: the statement below takes what is still
    -- 'received'.
    IF with_activities THEN
        SELECT e.accepted + p.accepted AS accepted, e.rejected + p.rejected AS rejected,
               e.expired + p.expired AS expired, e.no_devices + p.no_devices AS no_devices, e.superseded,
               e.deliveries + p.deliveries AS deliveries
        INTO activities
        FROM herald.ingest_activity_events(ids, at) e, herald.ingest_push_types(ids, at) p;
    ELSE
        SELECT 0 AS accepted, 0 AS rejected, 0 AS expired, 0 AS no_devices, 0 AS superseded, 0 AS deliveries
        INTO activities;
    END IF;
    SELECT min(i), max(i) INTO first_id, last_id FROM unnest(ids) AS i;
    SELECT array_agg(p.platform), array_agg(p.payload_kind), array_agg(p.silent_payload_kind)
    INTO platform_names, payload_kinds, silent_payload_kinds FROM herald.platforms p;
    SELECT array_agg(r.payload_kind || '/' || r.token_kind) INTO stored_kinds
    FROM herald.route_targets r JOIN herald.routes USING (route) WHERE routes.device_store_capacity IS NOT NULL;

    -- Dispatch is woken below only for deliveries a claim can take now: one leased at birth is
    -- already on its way to this daemon's dispatch, and a wake-up for it (this daemon's own, or
    -- every other daemon's) cost a claim that found nothing, for each ingest at a trickle.
    PERFORM set_config('herald.wakes_itself', 'dispatch', true);
    WITH normalized AS MATERIALIZED (
        SELECT n.id, n.kept, n.app_id, n.user_ref, n.device_ids, n.topic, n.silent, n.collapse_key,
               -- The app's defaults; a ttl becomes the absolute expires_at it implies, counted
               -- from when the notification is to be sent (a scheduled one's send_at).
               coalesce(n.priority, a.default_priority) AS priority,
               coalesce(n.message_class, a.default_message_class) AS message_class,
               -- least(): created_at is Herald's, but a restored or hand-written row must not
               -- overflow, nor a send_at at the end of time (refused below, but computed first).
               coalesce(n.expires_at,
                        greatest(least(n.created_at, at), least(coalesce(n.send_at, '-infinity'), at + herald.max_schedule()))
                        + coalesce(n.ttl, a.default_ttl)) AS expires_at,
               greatest(at, coalesce(n.send_at, at)) AS run_at,
               entries.data,
               -- A device sent through Web Push (a browser, a UnifiedPush phone) cannot take a payload
               -- this large; the others can.
               CASE WHEN size.bytes + 24 > size.web_limit_bytes THEN
                        format('payload is about %s bytes, %s over Web Push''s %s bytes of plaintext; shorten the title, body or data',
                               size.bytes + 24, size.bytes + 24 - size.web_limit_bytes, size.web_limit_bytes)
               END AS web_problem,
               CASE
                   WHEN a.app_id IS NULL THEN
                       format('unknown app %s: add it to herald.apps, or fix app_id', quote_literal(n.app_id))
                   WHEN NOT isfinite(n.expires_at) OR NOT isfinite(n.send_at) THEN
                       format('%s must be a finite time, not %s', CASE WHEN NOT isfinite(n.expires_at) THEN 'expires_at' ELSE 'send_at' END,
                              CASE WHEN NOT isfinite(n.expires_at) THEN n.expires_at ELSE n.send_at END)
                   WHEN n.send_at > at + herald.max_schedule() THEN
                       format('send_at %s is more than %s ahead; schedule it nearer', n.send_at, herald.max_schedule())
                   WHEN n.expires_at > greatest(at, coalesce(n.send_at, at)) + herald.max_ttl() THEN
                       format('expires_at %s is more than %s after the notification is sent (%s), the longest FCM keeps a message; give an earlier expires_at or a ttl',
                              n.expires_at, herald.max_ttl(), greatest(at, coalesce(n.send_at, at)))
                   WHEN n.collapse_key ~ '[[:cntrl:]]' OR octet_length(n.collapse_key) > 64 THEN
                       'collapse_key must be at most 64 bytes (APNs'' limit for apns-collapse-id) without control characters'
                   WHEN n.topic !~ '^[A-Za-z0-9_.~%-]+$' OR length(n.topic) > 900 THEN
                       format('topic %s is not an FCM topic name: 1 to 900 of the letters, digits and - _ . ~ %%', quote_literal(left(n.topic, 40)))
                   WHEN concat(n.sound, n.android_channel_id, n.ios_category, n.ios_thread_id, n.image_url, n.deep_link,
                               n.idempotency_key, n.ios_filter_criteria, n.ios_target_content_id) ~ '[[:cntrl:]]' THEN
                       format('%s contains a control character; remove it',
                              CASE WHEN n.sound ~ '[[:cntrl:]]' THEN 'sound'
                                   WHEN n.android_channel_id ~ '[[:cntrl:]]' THEN 'android_channel_id'
                                   WHEN n.ios_category ~ '[[:cntrl:]]' THEN 'ios_category'
                                   WHEN n.ios_thread_id ~ '[[:cntrl:]]' THEN 'ios_thread_id'
                                   WHEN n.image_url ~ '[[:cntrl:]]' THEN 'image_url'
                                   WHEN n.deep_link ~ '[[:cntrl:]]' THEN 'deep_link'
                                   WHEN n.ios_filter_criteria ~ '[[:cntrl:]]' THEN 'ios_filter_criteria'
                                   WHEN n.ios_target_content_id ~ '[[:cntrl:]]' THEN 'ios_target_content_id'
                                   ELSE 'idempotency_key' END)
                   WHEN n.ios_interruption_level NOT IN ('passive', 'active', 'time-sensitive', 'critical') THEN
                       format('ios_interruption_level must be passive, active, time-sensitive or critical, not %s',
                              quote_literal(left(n.ios_interruption_level, 40)))
                   -- NaN is above every number in PostgreSQL, so it is refused here too.
                   WHEN NOT n.ios_relevance_score BETWEEN 0 AND 1 THEN
                       format('ios_relevance_score must be a number from 0 to 1, not %s', n.ios_relevance_score)
                   WHEN n.android_proxy NOT IN ('allow', 'deny', 'if_priority_lowered') THEN
                       format('android_proxy must be allow, deny or if_priority_lowered, not %s',
                              quote_literal(left(n.android_proxy, 40)))
                   WHEN n.message_class NOT IN ('service', 'marketing') THEN
                       format('message_class must be service or marketing, not %s', quote_literal(left(n.message_class, 40)))
                   WHEN n.android_proxy IS NOT NULL AND n.topic IS NULL THEN
                       'android_proxy applies to FCM notification messages, which Herald sends only to topics: a device''s'
                       ' Android app gets a data message and shows it itself; leave android_proxy out'
                   WHEN NOT n.silent AND coalesce(n.title, '') = '' AND coalesce(n.body, '') = ''
                        AND (n.data IS NULL OR n.data = '{}'::jsonb) THEN
                       'nothing to send: give a title, a body or data (or set silent for a bare wake-up)'
                   WHEN pg_column_size(n.data) > herald.max_payload_bytes() THEN
                       format('data is %s bytes, more than any provider''s payload takes (%s bytes); shorten it',
                              pg_column_size(n.data), herald.max_payload_bytes())
                   WHEN n.data IS NOT NULL AND jsonb_typeof(n.data) <> 'object' THEN
                       format('data must be a JSON object of strings, not a JSON %s', jsonb_typeof(n.data))
                   WHEN entries.data_problem IS NOT NULL THEN entries.data_problem
                   WHEN n.image_url IS NOT NULL AND n.image_url NOT LIKE 'https://%' THEN
                       format('image_url must be an https:// URL, not %s', quote_literal(left(n.image_url, 80)))
                   WHEN n.device_ids IS NOT NULL AND cardinality(n.device_ids) = 0 THEN
                       'device_ids is empty: name at least one device'
                   WHEN size.bytes > size.limit_bytes THEN
                       format('payload is about %s bytes once encoded, %s over the %s-byte limit of FCM and APNs; shorten the title, body, data or iOS fields',
                              size.bytes, size.bytes - size.limit_bytes, size.limit_bytes)
               END AS problem
        FROM herald.notifications n
        -- Joins to other tables are LATERAL probes fenced with OFFSET 0, so that no plan can
        -- turn them inside out and read a whole table once per row (herald.claim_batch).
        LEFT JOIN LATERAL (SELECT a.* FROM herald.apps a WHERE a.app_id = n.app_id OFFSET 0) a ON true
        -- One walk over the data's entries: numbers and booleans become strings (FCM takes
        -- only strings), and the first entry FCM would refuse is named. Data of strings alone,
        -- the usual, is kept as it is, not built again.
        CROSS JOIN LATERAL (
            SELECT CASE WHEN count(*) FILTER (WHERE jsonb_typeof(e.value) IN ('number', 'boolean')) = 0 THEN n.data
                        ELSE n.data || jsonb_object_agg(e.key, to_jsonb(e.value #>> '{}'))
                                           FILTER (WHERE jsonb_typeof(e.value) IN ('number', 'boolean'))
                        END AS data,
                   (array_agg(
                        CASE WHEN jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean') THEN
                                 format('data value for key %s is a JSON %s; data values must be strings (numbers and booleans are converted)',
                                        quote_literal(e.key), jsonb_typeof(e.value))
                             ELSE format('data key %s is reserved by FCM (from, message_type, google.*, gcm.*); rename it',
                                         quote_literal(e.key))
                        END)
                    FILTER (WHERE jsonb_typeof(e.value) NOT IN ('string', 'number', 'boolean')
                                  OR herald.is_reserved_data_key(e.key)))[1] AS data_problem
            FROM jsonb_each(CASE WHEN jsonb_typeof(n.data) = 'object'
                                       AND pg_column_size(n.data) <= herald.max_payload_bytes() THEN n.data END) AS e
        ) AS entries
        -- An estimate of the bytes FCM counts: the Android data map, which carries the content
        -- plus Herald's own keys and is the larger of the two mobile platforms' payloads. A
        -- browser's JSON document carries the same, and must fit Web Push's 4096 bytes of
        -- ciphertext once encrypted: 3993 bytes of plaintext (RFC 8291: a 86-byte header, a
        -- 16-byte tag and a padding delimiter).
        CROSS JOIN LATERAL (
            -- The data object as jsonb prints it, then each field as it would print beside it
            -- (`, "key": value`), added up rather than built into one object and printed: that
            -- cost a quarter of ingest. It errs only towards refusing: by 2 bytes when there is
            -- no data (the first field's comma), and by a key the data repeats, counted twice.
            -- iOS's own fields are in the estimate too, since APNs counts them.
            SELECT coalesce(octet_length(entries.data::text), 2)
                   + coalesce(octet_length(to_json(n.title)::text) + octet_length('title') + 6, 0)
                   + coalesce(octet_length(to_json(n.body)::text) + octet_length('body') + 6, 0)
                   + coalesce(octet_length(to_json(n.image_url)::text) + octet_length('image_url') + 6, 0)
                   + coalesce(octet_length(to_json(n.deep_link)::text) + octet_length('deep_link') + 6, 0)
                   + coalesce(octet_length(to_json(n.sound)::text) + octet_length('sound') + 6, 0)
                   + coalesce(octet_length(to_json(n.android_channel_id)::text) + octet_length('channel_id') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_category)::text) + octet_length('category') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_thread_id)::text) + octet_length('thread-id') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_interruption_level)::text) + octet_length('interruption-level') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_relevance_score)::text) + octet_length('relevance-score') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_filter_criteria)::text) + octet_length('filter-criteria') + 6, 0)
                   + coalesce(octet_length(to_json(n.ios_target_content_id)::text) + octet_length('target-content-id') + 6, 0)
                   + 160 AS bytes,  -- herald_notification_id, herald_report and their quoting
                   CASE WHEN n.topic IS NULL THEN 4096 ELSE 2048 END AS limit_bytes,
                   3993 AS web_limit_bytes
        ) AS size
        WHERE n.id = ANY(ids) AND n.id BETWEEN first_id AND last_id AND n.state = 'received'
    ), live AS (
        SELECT * FROM normalized WHERE problem IS NULL AND expires_at > run_at
    ), targets AS (
        -- A device whose token is a subscription (a browser's, a UnifiedPush distributor's: it has
        -- the keys) is sent through Web Push, which a payload too large for it cannot take.
        -- `stored_until`: a non-collapsible delivery to a device that reports, on a route with a
        -- bounded store per device, counts in that store until it expires (herald.fill_device_stores).
        SELECT t.*,
               CASE WHEN t.reports AND t.collapse_key IS NULL AND t.kind || '/' || t.token_kind = ANY(stored_kinds)
                    THEN t.expires_at END AS stored_until
        FROM (
            SELECT t.*, CASE WHEN t.platform IS NULL THEN 'topic'
                             WHEN t.silent THEN silent_payload_kinds[array_position(platform_names, t.platform)]
                             ELSE payload_kinds[array_position(platform_names, t.platform)] END AS kind
            FROM (
                SELECT l.id AS notification_id, d.id AS device_id, d.platform, d.token_kind, d.reports, l.silent,
                       l.run_at, l.expires_at, l.collapse_key, CASE WHEN d.subscription THEN l.web_problem END AS web_problem
                FROM live l
                CROSS JOIN LATERAL (SELECT d.id, d.platform, d.token_kind, d.web_p256dh IS NOT NULL AS subscription,
                                           d.last_reported_at >= d.registration_started_at AS reports
                                    FROM herald.devices d
                                    WHERE d.app_id = l.app_id AND d.user_ref = l.user_ref AND d.disabled_at IS NULL
                                    OFFSET 0) d
                WHERE l.user_ref IS NOT NULL
                UNION ALL
                SELECT l.id, d.id, d.platform, d.token_kind, d.reports, l.silent, l.run_at, l.expires_at,
                       l.collapse_key, CASE WHEN d.subscription THEN l.web_problem END
                FROM live l
                CROSS JOIN LATERAL (SELECT DISTINCT unnest(l.device_ids) AS device_id) AS wanted
                CROSS JOIN LATERAL (SELECT d.id, d.platform, d.token_kind, d.web_p256dh IS NOT NULL AS subscription,
                                           d.last_reported_at >= d.registration_started_at AS reports
                                    FROM herald.devices d
                                    WHERE d.app_id = l.app_id AND d.device_id = wanted.device_id
                                      AND d.disabled_at IS NULL
                                    OFFSET 0) d
                WHERE l.device_ids IS NOT NULL
                UNION ALL
                SELECT l.id, NULL, NULL, NULL, NULL, l.silent, l.run_at, l.expires_at, l.collapse_key, NULL
                FROM live l WHERE l.topic IS NOT NULL
            ) AS t
        ) AS t
    ), created AS (
        -- Each delivery is queued in place, due at send_at or now; one sent through Web Push that
        -- cannot take the payload fails here, with the reason.
        -- The first `reserve` of those due now are leased at birth to `lease_to` for `lease_for`
        -- (their first attempt, as a claim would make it), when the caller asks.
        INSERT INTO herald.deliveries (notification_id, device_id, payload_kind, run_at, state, last_error, error_history,
                                       finished_at, locked_by, attempts, stored_until)
        SELECT t.notification_id, t.device_id, t.kind,
               CASE WHEN t.leased THEN at + lease_for ELSE t.run_at END,
               CASE WHEN t.web_problem IS NULL THEN 'queued' ELSE 'failed' END,
               t.web_problem,
               CASE WHEN t.web_problem IS NULL THEN '{}'::text[]
                    ELSE ARRAY[format('%s %s', to_char(at, 'YYYY-MM-DD HH24:MI:SS'), t.web_problem)] END,
               CASE WHEN t.web_problem IS NOT NULL THEN at END,
               CASE WHEN t.leased THEN lease_to END,
               CASE WHEN t.leased THEN 1 ELSE 0 END,
               CASE WHEN t.web_problem IS NULL THEN t.stored_until END
        FROM (SELECT t.*, t.due AND count(*) FILTER (WHERE t.due) OVER (ORDER BY t.notification_id, t.device_id) <= reserve
                          AS leased
              FROM (SELECT t.*, lease_to IS NOT NULL AND lease_for IS NOT NULL AND t.web_problem IS NULL AND t.run_at <= at AS due
                    FROM targets t) AS t) AS t
        -- In notification order, so a later notification's deliveries have larger ids.
        ORDER BY t.notification_id, t.device_id
        RETURNING id, notification_id, locked_by, stored_until,
                  state = 'queued' AND locked_by IS NULL AND run_at <= at AS claimable
    ), verdicts AS MATERIALIZED (
        -- The planner cannot know how many rows these CTEs hold, and a join or IN against
        -- `created` was planned as a rescan per row, quadratic in the batch; an array searched
        -- per row costs a few microseconds a batch.
        SELECT v.*,
               CASE WHEN v.problem IS NOT NULL THEN 'rejected'
                    WHEN v.expires_at <= v.run_at THEN 'expired'
                    WHEN v.id = ANY(ARRAY(SELECT c.notification_id FROM created c)) THEN 'accepted'
                    ELSE 'no_devices' END AS state
        FROM normalized v
    ), written AS (
        -- A rejected notification keeps what the producer wrote; the others get the defaults.
        UPDATE herald.notifications n
        SET state = v.state,
            reason = CASE v.state
                         WHEN 'rejected' THEN v.problem
                         WHEN 'expired' THEN format('expired at %s, before it could be sent', v.expires_at)
                         WHEN 'no_devices' THEN
                             CASE WHEN v.user_ref IS NOT NULL
                                  THEN format('user %s has no enabled device', quote_literal(v.user_ref))
                                  ELSE format('none of the devices %s is registered and enabled',
                                              array_to_string(v.device_ids, ', '))
                             END
                     END,
            priority = CASE WHEN v.state = 'rejected' THEN n.priority ELSE v.priority END,
            message_class = CASE WHEN v.state = 'rejected' THEN n.message_class ELSE v.message_class END,
            expires_at = CASE WHEN v.state = 'rejected' THEN n.expires_at ELSE v.expires_at END,
            ttl = CASE WHEN v.state = 'rejected' THEN n.ttl END,
            data = CASE WHEN v.state = 'rejected' THEN n.data ELSE v.data END,
            ingested_at = at
        FROM verdicts v
        -- One probe a row, by id and the partition key, which leaves the probe one partition while
        -- the plan runs. A range over the batch's ids here had the planner read that range once
        -- and compare every row with every other.
        WHERE n.kept = v.kept AND n.id = ANY(ARRAY[v.id])
        RETURNING n.state
    )
    SELECT count(*) FILTER (WHERE w.state = 'accepted')::int + activities.accepted AS accepted,
           count(*) FILTER (WHERE w.state = 'rejected')::int + activities.rejected AS rejected,
           count(*) FILTER (WHERE w.state = 'expired')::int + activities.expired AS expired,
           count(*) FILTER (WHERE w.state = 'no_devices')::int + activities.no_devices AS no_devices,
           activities.superseded AS superseded,
           (SELECT count(*) FROM created)::int + activities.deliveries AS deliveries,
           ARRAY(SELECT c.id FROM created c WHERE c.locked_by IS NOT NULL ORDER BY c.id) AS leased,
           ARRAY(SELECT c.id FROM created c WHERE c.stored_until IS NOT NULL ORDER BY c.id) AS stored,
           EXISTS (SELECT FROM created c WHERE c.claimable) AS claimable
    INTO result
    FROM written w;
    PERFORM set_config('herald.wakes_itself', '', true);
    IF result.claimable THEN
        PERFORM pg_notify('herald_jobs', 'dispatch');
    END IF;
    -- The devices' stores, kept within their capacity in a statement of its own (it must see
    -- every other ingester's deliveries committed).
    IF cardinality(result.stored) > 0 THEN
        PERFORM herald.fill_device_stores(result.stored, at, catch_up_every);
    END IF;
    RETURN QUERY SELECT result.accepted, result.rejected, result.expired, result.no_devices, result.superseded,
                        result.deliveries, result.leased;
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest_locked(bigint[],boolean,timestamp with time zone,text,interval,integer,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.ingest_locked(bigint[],boolean,timestamp with time zone,text,interval,integer,interval) TO herald_daemon;

-- Ingests the notifications `ids` (herald.ingest_locked). Callers lock nothing themselves: this
-- takes those still 'received' in id order, so concurrent ingesters cannot deadlock, and skips
-- those another ingester holds (it is ingesting them). A row another session holds locked is
-- waited for half a second at most, here and in herald.ingest_next (docs/architecture.md,
-- "Producers beside the workers"), then the call fails with 55P03 and the caller goes on
-- without that app's notifications for a while (IngestWorker).
CREATE OR REPLACE FUNCTION herald.ingest(ids bigint[], at timestamptz DEFAULT now(), lease_to text DEFAULT NULL,
    lease_for interval DEFAULT NULL, reserve integer DEFAULT 0, catch_up_every interval DEFAULT NULL)
RETURNS TABLE (accepted integer, rejected integer, expired integer, no_devices integer, superseded integer,
               deliveries integer, leased bigint[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET jit = off SET lock_timeout = '500ms' AS $$
DECLARE
    taken bigint[];
    with_activities boolean;
BEGIN
    SELECT array_agg(locked.id), bool_or(locked.activity) INTO taken, with_activities
    FROM (SELECT n.id, n.activity_event IS NOT NULL OR n.push_type IS NOT NULL AS activity
          FROM herald.notifications n
          WHERE n.id = ANY(ids) AND n.state = 'received' ORDER BY n.id FOR UPDATE SKIP LOCKED) AS locked;
    RETURN QUERY SELECT * FROM herald.ingest_locked(coalesce(taken, '{}'), coalesce(with_activities, false), at,
                                                    lease_to, lease_for, reserve, catch_up_every);
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest(bigint[],timestamp with time zone,text,interval,integer,interval) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.ingest(bigint[],timestamp with time zone,text,interval,integer,interval) TO herald_daemon;

-- The ingest worker's step: takes up to `batch` notifications waiting for ingest, oldest
-- first, skipping those another ingester holds and those of the apps in `skip_apps` (the worker
-- found rows of theirs locked by another session: HeldApps), and ingests them, leasing up to
-- `reserve` of the deliveries due now to `lease_to` (herald.ingest_locked). The counts add up to
-- how many it took; fewer than `batch` means none was left.
--
-- The pick walks each partition's notifications_received in id order (a Merge Append) and
-- stops after `batch`: a partition not analyzed yet looks nearly empty to the planner, which
-- would rather sort every waiting row (enable_sort = off, as in herald.claim_batch).
CREATE OR REPLACE FUNCTION herald.ingest_next(batch int, at timestamptz DEFAULT now(), lease_to text DEFAULT NULL,
    lease_for interval DEFAULT NULL, reserve int DEFAULT 0, catch_up_every interval DEFAULT NULL,
    skip_apps text[] DEFAULT '{}')
RETURNS TABLE (accepted int, rejected int, expired int, no_devices int, superseded int, deliveries int,
               leased bigint[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off
SET enable_mergejoin = off SET jit = off SET enable_sort = off
SET lock_timeout = '500ms' AS $$
DECLARE
    ids bigint[];
    with_activities boolean;
BEGIN
    SELECT array_agg(picked.id), bool_or(picked.activity) INTO ids, with_activities
    FROM (SELECT n.id, n.activity_event IS NOT NULL OR n.push_type IS NOT NULL AS activity
          FROM herald.notifications n WHERE n.state = 'received' AND n.app_id <> ALL(skip_apps)
          ORDER BY n.id LIMIT batch FOR UPDATE SKIP LOCKED) AS picked;
    IF ids IS NULL THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0, 0, '{}'::bigint[];
    ELSE
        RETURN QUERY SELECT * FROM herald.ingest_locked(ids, with_activities, at, lease_to, lease_for, reserve,
                                                        catch_up_every);
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION herald.ingest_next(integer,timestamp with time zone,text,interval,integer,interval,text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.ingest_next(integer,timestamp with time zone,text,interval,integer,interval,text[]) TO herald_daemon;

-- The next `max_count` notifications waiting to be ingested, oldest first, without locking them:
-- the list the ingest worker takes one at a time after a batch failed.
CREATE OR REPLACE FUNCTION herald.notifications_waiting(max_count bigint) RETURNS SETOF bigint
LANGUAGE sql STABLE AS $$
    SELECT n.id FROM herald.notifications n WHERE n.state = 'received' ORDER BY n.id LIMIT max_count;
$$;
REVOKE ALL ON FUNCTION herald.notifications_waiting(bigint) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.notifications_waiting(bigint) TO herald_daemon;

-- Rejects notification `notification`, if it still waits: ingesting it alone failed with an error
-- that trying again cannot mend (`reason`, PostgreSQL's words).
CREATE OR REPLACE FUNCTION herald.reject_unprocessable(notification bigint, reason text) RETURNS void
LANGUAGE sql AS $$
    UPDATE herald.notifications n SET state = 'rejected', reason = reject_unprocessable.reason, ingested_at = now()
    WHERE n.id = notification AND n.state = 'received';
$$;
REVOKE ALL ON FUNCTION herald.reject_unprocessable(bigint,text) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.reject_unprocessable(bigint,text) TO herald_daemon;
