-- 007: every attempt's error stays readable, not only the last one.

ALTER TABLE herald.deliveries ADD COLUMN error_history text[] NOT NULL DEFAULT '{}';

-- The journey view shows it, last.
CREATE OR REPLACE VIEW herald.notification_journey AS
SELECT n.id AS notification_id, n.app_id, n.idempotency_key,
       coalesce('user ' || n.user_ref, 'devices ' || array_to_string(n.device_ids, ','), 'topic ' || n.topic) AS target,
       n.state AS notification_state, n.reason AS notification_reason, n.created_at, n.ingested_at, n.expires_at,
       d.id AS delivery_id, dev.device_id, dev.platform, herald.token_hint(dev.push_token) AS token_hint,
       d.payload_kind, d.state AS delivery_state, d.attempts, d.last_error, d.provider_message_id,
       d.sent_at, d.delivered_at, d.finished_at,
       dev.disabled_cause AS device_disabled_cause, dev.disabled_at AS device_disabled_at,
       d.error_history
FROM herald.notifications n
LEFT JOIN herald.deliveries d ON d.notification_id = n.id
LEFT JOIN herald.devices dev ON dev.id = d.device_id;
