-- One home per rule (docs/architecture.md, "One home per provider").
--
-- A delivery's report reference is made by the claim (herald.delivery_reference, in
-- functions/dispatch.sql), no longer by the daemon as well: herald.claim_sends returns it, so
-- its columns change. The previous release's daemons read the claim by its columns' names, and
-- ignore the new one.
DROP FUNCTION IF EXISTS herald.claim_sends(timestamp with time zone, integer, text, interval, bigint[]);

-- HMAC-SHA256 became herald.hmac_pads and herald.reference_tag, so that a claim builds the
-- secret's pads once rather than once per delivery.
DROP FUNCTION IF EXISTS herald.hmac_sha256(bytea, bytea);

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
