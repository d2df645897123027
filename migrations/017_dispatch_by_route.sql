-- 017: dispatch by route. The claim no longer carries each app's setup on every delivery, and
-- routes whose windows are full are recorded for operators.
--
-- herald.claim_deliveries returned the app's FCM, APNs and VAPID setup (13 columns) with every
-- delivery; its successor herald.claim_sends (migrations/functions/dispatch.sql) returns the
-- version of the app's row instead, and the daemon reads a setup only when its version changes.
-- The old function is dropped rather than replaced under the same name: a daemon older than this
-- migration still running during an upgrade then fails its claims (an error in its log, nothing
-- leased, nothing lost) instead of reading rows that lack the columns it expects.
DROP FUNCTION herald.claim_deliveries(timestamptz, int, text, interval);

-- A route (an app's FCM, its iOS through FCM, its APNs, one push service origin of its
-- browsers) whose window of sends in flight was full, so that deliveries of it waited: one row
-- per route and daemon worker, written by the dispatch worker at most once a minute while it
-- lasts. `herald status` lists those seen in the last two minutes.
CREATE TABLE herald.route_saturation (
    app_id     text NOT NULL REFERENCES herald.apps (app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    route      text NOT NULL CHECK (route IN ('fcm', 'fcm_apns', 'apns', 'web')),
    -- The push service's origin, for browsers; '' for the other routes.
    origin     text NOT NULL DEFAULT '',
    worker     text NOT NULL,
    -- When this episode began (the first full window after two quiet minutes), when it was last
    -- seen, the route's sends in flight then, and the deliveries postponed in the episode.
    since      timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    in_flight  int NOT NULL,
    postponed  bigint NOT NULL,
    PRIMARY KEY (app_id, route, origin, worker)
);
GRANT SELECT ON herald.route_saturation TO herald_operator;
