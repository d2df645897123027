-- One home per rule (docs/architecture.md, "One home per provider").
--
-- A delivery's report reference is made by the claim (herald.delivery_reference, in
-- functions/dispatch.sql), no longer by the daemon as well: herald.claim_sends returns it, so
-- its columns change. The previous release's daemons read the claim by its columns' names, and
-- ignore the new one.
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval, bigint[]);

-- HMAC-SHA256 became herald.hmac_pads and herald.reference_tag: the secret's pads are kept
-- beside it, generated from it (a new secret renews them), so that neither a claim nor a report
-- builds them again.
DROP FUNCTION IF EXISTS herald.hmac_sha256(bytea, bytea);
CREATE OR REPLACE FUNCTION herald.hmac_pads(key bytea, OUT inner_pad bytea, OUT outer_pad bytea)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH sized AS (SELECT CASE WHEN octet_length(key) > 64 THEN sha256(key) ELSE key END AS k),
         padded AS (SELECT k || decode(repeat('00', 64 - octet_length(k)), 'hex') AS k FROM sized)
    SELECT string_agg(int8send(w.word # x'3636363636363636'::bigint), '' ORDER BY i),
           string_agg(int8send(w.word # x'5c5c5c5c5c5c5c5c'::bigint), '' ORDER BY i)
    FROM padded, generate_series(0, 7) AS i,
         LATERAL (SELECT ('x' || encode(substring(k FROM i * 8 + 1 FOR 8), 'hex'))::bit(64)::bigint AS word) w;
$$;
ALTER TABLE herald.secrets
    ADD COLUMN inner_pad bytea GENERATED ALWAYS AS ((herald.hmac_pads(value)).inner_pad) STORED,
    ADD COLUMN outer_pad bytea GENERATED ALWAYS AS ((herald.hmac_pads(value)).outer_pad) STORED;

-- How long a device waits between two wake-ups, and how recent a send is too recent to count
-- as missed, are the reconcile worker's settings (HERALD_WAKEUP_INTERVAL), passed at each call:
-- herald.reconcile has no defaults of its own for them any more, and its window to fetch from
-- defaults to herald.fetch_window(). Removing a default takes a new function. The previous
-- release's daemons pass every argument, so they call the new one.
DROP FUNCTION IF EXISTS herald.reconcile(bigint[], timestamp with time zone, interval, interval, interval);

-- How a token of each kind must look is the kind's row, with its token kind, so that
-- herald.register_device checks every kind alike and a provider that adds a kind says how its
-- tokens look: `shape`, a regular expression its tokens match (NULL: any token), said as
-- `shape_description` in the error; `lowercase` stores the token in lower case (hex digits).
ALTER TABLE herald.token_kinds
    ADD COLUMN shape text,
    ADD COLUMN shape_description text,
    ADD COLUMN lowercase boolean NOT NULL DEFAULT false,
    ADD CHECK ((shape IS NULL) = (shape_description IS NULL));
UPDATE herald.token_kinds
SET description = 'an APNs device token', shape = '^([0-9A-Fa-f]{2}){32,}$',
    shape_description = '64 or more hexadecimal digits (the app''s deviceToken as hex)', lowercase = true
WHERE token_kind = 'apns_device_token';
