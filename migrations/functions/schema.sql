-- schema: what the schema says of itself to the daemons that run on it.
--
-- What runs now: `herald migrate` applies this file again whenever its text changes (after the
-- numbered migrations), so edit it in place. migrations/README.md says when a change needs a
-- numbered migration instead. Each function is followed by who may call it.

-- The support window of a rolling upgrade: the oldest daemon this schema serves, named by the
-- newest numbered migration that daemon carries. A release's schema serves its own daemons and
-- those of the release before it (CHANGELOG.md, "Upgrading"), so each release sets this to the
-- last numbered migration of the release before it: 44, release 0.10.0's. `herald run` refuses
-- to start a daemon older than this; one older that is already running may fail, and is to be
-- stopped before the upgrade.
CREATE OR REPLACE FUNCTION herald.oldest_daemon_served() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 44 $$;
REVOKE ALL ON FUNCTION herald.oldest_daemon_served() FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.oldest_daemon_served() TO herald_daemon;
GRANT EXECUTE ON FUNCTION herald.oldest_daemon_served() TO herald_operator;
