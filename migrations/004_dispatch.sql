-- 004: what the dispatch worker needs.

-- Secrets every daemon shares. 'report_hmac' signs the delivery-report references that
-- payloads carry, so that apps can report deliveries and nobody can forge a report. It is
-- made here, from PostgreSQL's strong random source, so that all daemons on all hosts agree
-- without configuration. Producers cannot read it. To rotate it, update the row and restart the
-- daemons; references issued under the old secret stop working.
CREATE TABLE herald.secrets (
    name        text PRIMARY KEY,
    value       bytea NOT NULL CHECK (octet_length(value) >= 16),
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO herald.secrets (name, value)
SELECT 'report_hmac',
       decode(replace(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

-- The app's credentials or APNs setup failed: when and how. Cleared by the next success.
-- Deliveries of such an app wait and retry; no device is blamed.
ALTER TABLE herald.apps
    ADD COLUMN config_error text,
    ADD COLUMN config_error_at timestamptz;
