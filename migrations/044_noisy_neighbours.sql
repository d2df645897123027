-- Producers' sessions live in Herald's database, beside its workers, so nothing a producer can
-- lock may stand on a worker's path, and what one producer registers may not reach another's
-- users (docs/architecture.md, "Producers beside the workers").
--
-- Locks only daemons can take. The workers serialized an app's Live Activity events and the
-- making of generations with advisory locks, whose keys any session can compute and take (an
-- advisory lock needs no privilege, and pg_locks shows every key held): a producer that held
-- one stopped every app's ingest, or all retention. They lock a row of this table instead,
-- which no producer or operator may read, write or lock.
CREATE TABLE herald.worker_locks (
    name text PRIMARY KEY
);
COMMENT ON TABLE herald.worker_locks IS 'Rows a worker locks to do alone what the row''s name says; only daemons and Herald''s own functions can lock them (no advisory lock, which any session can take).';
COMMENT ON COLUMN herald.worker_locks.name IS '''generations'': making, opening and retiring generations (herald.open_generation, retire_generation, drop_generation); ''live activities of <app>'': ingesting that app''s Live Activity events (herald.ingest_activity_events), a row made the first time.';
INSERT INTO herald.worker_locks (name) VALUES ('generations');
REVOKE ALL ON herald.worker_locks FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE ON herald.worker_locks TO herald_daemon;

-- A push type's token is live on one device of an app at a time, whatever the interleaving of
-- two registrations: a unique index, not a read before a write (two devices registering one
-- VoIP token at once both kept it, and a call for one user rang the other's phone). The token's
-- app is kept beside it for the index; a device never changes app.
-- (Not NOT NULL in this release: until the function files that fill it are applied, a register
-- call of the previous release's text inserts none.)
ALTER TABLE herald.push_type_tokens ADD COLUMN app_id text;
UPDATE herald.push_type_tokens t SET app_id = d.app_id FROM herald.devices d WHERE d.id = t.device_id;
COMMENT ON COLUMN herald.push_type_tokens.app_id IS 'The app of its device (herald.devices.app_id): a token is live on at most one device of an app (push_type_tokens_live). NULL only for one registered during the upgrade to migration 44.';
-- Tokens that race left live on two devices keep the newest registration.
UPDATE herald.push_type_tokens t
SET disabled_at = now(), disabled_cause = 'token_moved',
    disabled_reason = 'the same token was live on another device of the app, registered later (migration 044)'
WHERE t.disabled_at IS NULL
  AND EXISTS (SELECT FROM herald.push_type_tokens o
              WHERE o.app_id = t.app_id AND o.token_kind = t.token_kind AND o.token = t.token
                AND o.disabled_at IS NULL AND (o.registered_at, o.id) > (t.registered_at, t.id));
DROP INDEX herald.push_type_tokens_token;
CREATE UNIQUE INDEX push_type_tokens_live ON herald.push_type_tokens (app_id, token_kind, token)
    WHERE disabled_at IS NULL;
GRANT SELECT (app_id) ON herald.push_type_tokens TO herald_operator;

-- The same for push-to-start tokens, per ActivityAttributes type (one device's token may be the
-- same for all its types).
ALTER TABLE herald.activity_tokens ADD COLUMN app_id text;
UPDATE herald.activity_tokens t SET app_id = d.app_id FROM herald.devices d WHERE d.id = t.device_id;
COMMENT ON COLUMN herald.activity_tokens.app_id IS 'The app of its device (herald.devices.app_id): a push-to-start token is live on at most one device of an app for each attributes type (activity_tokens_push_to_start_live). NULL only for one registered during the upgrade to migration 44.';
UPDATE herald.activity_tokens t
SET ended_at = now(), ended_cause = 'replaced',
    ended_reason = 'the same token was live on another device of the app, registered later (migration 044)'
WHERE t.kind = 'push_to_start' AND t.ended_at IS NULL
  AND EXISTS (SELECT FROM herald.activity_tokens o
              WHERE o.app_id = t.app_id AND o.kind = 'push_to_start' AND o.attributes_type = t.attributes_type
                AND o.token = t.token AND o.ended_at IS NULL AND (o.registered_at, o.id) > (t.registered_at, t.id));
CREATE UNIQUE INDEX activity_tokens_push_to_start_live ON herald.activity_tokens (app_id, attributes_type, token)
    WHERE kind = 'push_to_start' AND ended_at IS NULL;
GRANT SELECT (app_id) ON herald.activity_tokens TO herald_operator;

-- What a producer writes is bounded at the door: a notification, all its columns together (its
-- data, title, body, devices, …), is at most herald.max_notification_bytes() (64 KiB), refused at
-- its INSERT with a message that says so. No provider takes a payload over 5 KiB, and rows of
-- megabytes cost every app's ingest seconds each. A trigger whose condition is the size, so
-- that the usual insert calls no function (a CHECK of every column would be parsed again at
-- every statement that writes the table). The functions are functions/producers.sql's, made
-- here first with the file's text, since the trigger names them.
CREATE OR REPLACE FUNCTION herald.max_notification_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 65536 $$;
REVOKE ALL ON FUNCTION herald.max_notification_bytes() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.max_notification_bytes() TO PUBLIC;
CREATE OR REPLACE FUNCTION herald.refuse_oversized_notification() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'a notification is at most % bytes, its data, title, body, devices and other fields together, and this one is % (herald.max_notification_bytes()): no provider takes a payload over 5 KiB; shorten its data, title or body, or name fewer devices',
        herald.max_notification_bytes(), pg_column_size(NEW.*) USING ERRCODE = 'check_violation';
END;
$$;
REVOKE ALL ON FUNCTION herald.refuse_oversized_notification() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
CREATE TRIGGER notifications_refuse_oversized BEFORE INSERT ON herald.notifications_rotating
    FOR EACH ROW WHEN (pg_column_size(NEW.*) > herald.max_notification_bytes())
    EXECUTE FUNCTION herald.refuse_oversized_notification();
