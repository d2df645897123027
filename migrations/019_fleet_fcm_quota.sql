-- One FCM quota for the whole fleet. FCM's quota is per project (600,000 messages a minute by
-- default), but each daemon kept its own token bucket, so three daemons sent up to three times
-- the quota and then met 429 RESOURCE_EXHAUSTED together. Every daemon on the database now draws
-- a project's sends from its row here (herald.draw_fcm_quota, a second's budget at a time), and
-- a 429 pauses the project for all of them (herald.pause_fcm_project).
CREATE TABLE herald.fcm_quotas (
    project_id    text PRIMARY KEY,
    -- Sends a second for the whole fleet; NULL: the daemons' HERALD_FCM_RATE_LIMIT. An operator
    -- sets it for a project whose quota Google raised (or that shares its quota with others).
    per_second    int CHECK (per_second > 0),
    -- The second being drawn from (the server's clock) and how much of it is drawn.
    window_start  timestamptz NOT NULL DEFAULT '-infinity',
    drawn         int NOT NULL DEFAULT 0,
    -- After a 429: nothing is drawn until then (FCM's Retry-After, 60 s when it gives none).
    -- Only the daemons set it; a pause ends by itself.
    paused_until  timestamptz NOT NULL DEFAULT '-infinity',
    paused_reason text
);
COMMENT ON TABLE herald.fcm_quotas IS
    'Each FCM project''s sends, drawn a second at a time by every daemon on the database; paused after a 429';
GRANT SELECT, INSERT (project_id, per_second), UPDATE (per_second) ON herald.fcm_quotas TO herald_operator;
