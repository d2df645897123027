-- What needs the functions and views: the checks and generated columns that call a function,
-- the rows every database starts with (some name a view), triggers and row-level security
-- policies. Applied after migrations/functions/, in the transaction that applied tables.sql;
-- generated with it.
ALTER TABLE herald.app_unifiedpush ADD CONSTRAINT app_unifiedpush_hosts_check CHECK (((cardinality(hosts) > 0) AND herald.are_host_patterns(hosts)));
ALTER TABLE herald.app_webpush ADD CONSTRAINT "hosts lists host names, *.domain or *" CHECK (((cardinality(hosts) = 0) OR herald.are_host_patterns(hosts)));
ALTER TABLE herald.secrets ADD COLUMN inner_pad bytea GENERATED ALWAYS AS ((herald.hmac_pads(value)).inner_pad) STORED;
ALTER TABLE herald.secrets ADD COLUMN outer_pad bytea GENERATED ALWAYS AS ((herald.hmac_pads(value)).outer_pad) STORED;
COMMENT ON COLUMN herald.secrets.inner_pad IS 'HMAC-SHA256''s inner padded key, generated from value (herald.hmac_pads) so claims and reports need not build it.';
COMMENT ON COLUMN herald.secrets.outer_pad IS 'HMAC-SHA256''s outer padded key, generated from value (herald.hmac_pads) so claims and reports need not build it.';

-- Rows every database starts with
-- -------------------------------

INSERT INTO herald.config_scopes (scope, waiting) VALUES
    ('apns', 'iOS deliveries straight to APNs'),
    ('fcm', 'every delivery through FCM'),
    ('fcm_apns', 'iOS deliveries through FCM'),
    ('harmony', 'deliveries to HarmonyOS phones'),
    ('hms', 'deliveries through Huawei Push Kit'),
    ('honor', 'deliveries through Honor Push'),
    ('oppo', 'deliveries through OPPO Push'),
    ('unifiedpush', 'deliveries to Android phones through UnifiedPush distributors'),
    ('vivo', 'deliveries through vivo Push'),
    ('web', 'deliveries to browsers'),
    ('xiaomi', 'deliveries through Xiaomi Mi Push');
INSERT INTO herald.generations (generation, first_id, end_id, opened_at, closed_at) VALUES
    (0, -9223372036854775808, 4294967296, '-infinity', now()),
    (1, 4294967296, 8589934592, now(), NULL),
    (2, 8589934592, 12884901888, NULL, NULL),
    (3, 12884901888, 17179869184, NULL, NULL);
INSERT INTO herald.providers (provider, settings) VALUES
    ('apns', 'herald.app_apns'),
    ('fcm', 'herald.app_fcm'),
    ('harmony', 'herald.app_harmony'),
    ('hms', 'herald.app_hms'),
    ('honor', 'herald.app_honor'),
    ('oppo', 'herald.app_oppo'),
    ('unifiedpush', 'herald.app_unifiedpush'),
    ('vivo', 'herald.app_vivo'),
    ('webpush', 'herald.app_webpush_settings'),
    ('xiaomi', 'herald.app_xiaomi');
INSERT INTO herald.routes (route, provider, description, scopes, device_store_capacity) VALUES
    ('apns', 'apns', 'iOS straight to APNs', '{apns}', NULL),
    ('fcm', 'fcm', 'FCM', '{fcm}', 80),
    ('fcm_apns', 'fcm', 'iOS through FCM', '{fcm,fcm_apns}', NULL),
    ('harmony', 'harmony', 'HarmonyOS through Push Kit', '{harmony}', NULL),
    ('hms', 'hms', 'Android through Huawei Push Kit', '{hms}', NULL),
    ('honor', 'honor', 'Android through Honor Push', '{honor}', NULL),
    ('oppo', 'oppo', 'Android through OPPO Push', '{oppo}', NULL),
    ('unifiedpush', 'unifiedpush', 'Android through UnifiedPush', '{unifiedpush}', NULL),
    ('vivo', 'vivo', 'Android through vivo Push', '{vivo}', NULL),
    ('web', 'webpush', 'browsers (Web Push)', '{web}', NULL),
    ('xiaomi', 'xiaomi', 'Android through Xiaomi Mi Push', '{xiaomi}', NULL);
INSERT INTO herald.token_kinds (token_kind, platforms, description, shape, shape_description, lowercase, endpoint_policy) VALUES
    ('apns_device_token', '{ios}', 'an APNs device token', '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the app''s deviceToken as hex)', true, NULL),
    ('apns_location_token', '{ios}', 'a location push token (CLLocationManager.startMonitoringLocationPushes)', '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the token as hex)', true, NULL),
    ('apns_pushtotalk_token', '{ios}', 'a Push to Talk token (PTChannelManager''s ephemeral push token)', '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the token as hex)', true, NULL),
    ('apns_voip_token', '{ios}', 'a PushKit VoIP token (PKPushCredentials.token)', '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the token as hex)', true, NULL),
    ('apns_widgets_token', '{ios}', 'a WidgetKit push token (WidgetPushInfo.token)', '^([0-9A-Fa-f]{2}){32,}$', '64 or more hexadecimal digits (the token as hex)', true, NULL),
    ('harmony_token', '{harmony}', 'a HarmonyOS Push Kit token', '^[A-Za-z0-9_.:=+/-]{16,}$', '16 or more letters, digits and -_.:=+/ (the token pushService.getToken gave the app)', false, NULL),
    ('hms_token', '{android}', 'a Huawei Push Kit token', '^[A-Za-z0-9_.:=+/-]{16,}$', '16 or more letters, digits and -_.:=+/ (the token HmsInstanceId.getToken gave the app)', false, NULL),
    ('honor_token', '{android}', 'an Honor Push token', '^[A-Za-z0-9_.:=+/-]{16,}$', '16 or more letters, digits and -_.:=+/ (the token HonorPushClient.getPushToken gave the app)', false, NULL),
    ('installation_id', '{android,ios}', 'a Firebase Installation ID (FCM)', NULL, NULL, false, NULL),
    ('oppo_token', '{android}', 'an OPPO Push registration id', '^((([0-9A-Za-z]{2,10})_)?[A-Za-z0-9_]*_)?[0-9a-fA-F]{32}$|^[0-9a-fA-F]{24}$', '32 hex digits after an optional prefix such as CN_, or 24 hex digits (the registration id HeytapPushManager.getRegister gave the app)', false, NULL),
    ('registration_token', '{android,ios}', 'an FCM registration token', NULL, NULL, false, NULL),
    ('unifiedpush', '{android}', 'a UnifiedPush endpoint with its keys', NULL, NULL, false, 'herald.app_unifiedpush'),
    ('vivo_token', '{android}', 'a vivo Push regId', '^[A-Za-z0-9_.:=+/-]{16,}$', '16 or more letters, digits and -_.:=+/ (the regId PushClient.getRegId gave the app)', false, NULL),
    ('web_subscription', '{web}', 'a browser''s push subscription', NULL, NULL, false, 'herald.web_push_endpoint_policy'),
    ('xiaomi_regid', '{android}', 'a Xiaomi Mi Push regId', '^[A-Za-z0-9_.:=+/-]{16,}$', '16 or more letters, digits and -_.:=+/ (the regId MiPushClient.getRegId gave the app)', false, NULL);
INSERT INTO herald.platforms (platform, description, payload_kind, silent_payload_kind, default_token_kind) VALUES
    ('android', 'an Android phone', 'android_data', 'android_data', 'registration_token'),
    ('harmony', 'a HarmonyOS NEXT phone', 'harmony_alert', 'harmony_background', 'harmony_token'),
    ('ios', 'an iPhone or iPad', 'ios_alert', 'ios_background', 'registration_token'),
    ('web', 'a browser', 'web', 'web', 'web_subscription');
INSERT INTO herald.push_types (push_type, description, payload_kind, token_kind, max_payload_bytes, takes_data, may_be_normal, default_ttl, max_ttl, max_ttl_reason) VALUES
    ('location', 'location queries (the app''s Location Push Service Extension answers)', 'ios_location', 'apns_location_token', 4096, true, true, NULL, '28 days', 'APNs keeps nothing longer'),
    ('pushtotalk', 'Push to Talk (the system wakes the app to play a channel''s audio)', 'ios_pushtotalk', 'apns_pushtotalk_token', 4096, true, false, '00:00:10', '00:01:00', 'a late one must not ring or play'),
    ('voip', 'PushKit VoIP calls (the app reports each to CallKit)', 'ios_voip', 'apns_voip_token', 5120, true, false, '00:00:30', '00:02:00', 'a late one must not ring or play'),
    ('widgets', 'WidgetKit push updates (the widgets reload their timelines; iOS 26)', 'ios_widgets', 'apns_widgets_token', 4096, false, false, NULL, '28 days', 'APNs keeps nothing longer');
INSERT INTO herald.route_targets (payload_kind, token_kind, route) VALUES
    ('android_data', 'hms_token', 'hms'),
    ('android_data', 'honor_token', 'honor'),
    ('android_data', 'installation_id', 'fcm'),
    ('android_data', 'oppo_token', 'oppo'),
    ('android_data', 'registration_token', 'fcm'),
    ('android_data', 'unifiedpush', 'unifiedpush'),
    ('android_data', 'vivo_token', 'vivo'),
    ('android_data', 'xiaomi_regid', 'xiaomi'),
    ('android_wakeup', 'installation_id', 'fcm'),
    ('android_wakeup', 'registration_token', 'fcm'),
    ('broadcast', NULL, 'apns'),
    ('harmony_alert', 'harmony_token', 'harmony'),
    ('harmony_background', 'harmony_token', 'harmony'),
    ('ios_alert', 'apns_device_token', 'apns'),
    ('ios_alert', 'installation_id', 'fcm_apns'),
    ('ios_alert', 'registration_token', 'fcm_apns'),
    ('ios_background', 'apns_device_token', 'apns'),
    ('ios_background', 'installation_id', 'fcm_apns'),
    ('ios_background', 'registration_token', 'fcm_apns'),
    ('ios_location', 'apns_location_token', 'apns'),
    ('ios_pushtotalk', 'apns_pushtotalk_token', 'apns'),
    ('ios_voip', 'apns_voip_token', 'apns'),
    ('ios_wakeup', 'apns_device_token', 'apns'),
    ('ios_wakeup', 'installation_id', 'fcm_apns'),
    ('ios_wakeup', 'registration_token', 'fcm_apns'),
    ('ios_widgets', 'apns_widgets_token', 'apns'),
    ('live_activity', 'apns_device_token', 'apns'),
    ('live_activity', 'installation_id', 'fcm_apns'),
    ('live_activity', 'registration_token', 'fcm_apns'),
    ('topic', NULL, 'fcm'),
    ('web', 'web_subscription', 'web');
INSERT INTO herald.transport_token_kinds (platform, transport, token_kind) VALUES
    ('ios', 'apns', 'apns_device_token');
INSERT INTO herald.worker_locks (name) VALUES
    ('generations');
INSERT INTO herald.secrets (name, value)
SELECT 'report_hmac',
       decode(replace(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex');

-- Triggers
-- --------

CREATE TRIGGER app_apns_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_apns FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_fcm_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_fcm FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_harmony_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_harmony FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_hms_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_hms FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_honor_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_honor FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_oppo_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_oppo FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_unifiedpush_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_unifiedpush FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_vivo_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_vivo FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_webpush_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_webpush FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_xiaomi_changed AFTER INSERT OR DELETE OR UPDATE ON herald.app_xiaomi FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER deliveries_notify_dispatch AFTER INSERT ON herald.deliveries FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('dispatch');
CREATE TRIGGER delivery_reports_enqueue_reconcile AFTER INSERT ON herald.delivery_reports REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION herald.enqueue_reconcile();
CREATE TRIGGER devices_record_changes AFTER UPDATE OF disabled_at, disabled_cause ON herald.devices FOR EACH ROW WHEN ((old.disabled_cause IS DISTINCT FROM new.disabled_cause)) EXECUTE FUNCTION herald.record_device_change();
CREATE TRIGGER devices_record_notification_changes AFTER UPDATE OF notifications_off_at ON herald.devices FOR EACH ROW WHEN (((old.notifications_off_at IS NULL) IS DISTINCT FROM (new.notifications_off_at IS NULL))) EXECUTE FUNCTION herald.record_device_change();
CREATE TRIGGER fcm_delivery_days_noop BEFORE UPDATE ON herald.fcm_delivery_days FOR EACH ROW WHEN ((NOT (old.* IS DISTINCT FROM new.*))) EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TRIGGER jobs_notify_on_insert AFTER INSERT ON herald.jobs REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_new_jobs();
CREATE TRIGGER notifications_notify_ingest AFTER INSERT ON herald.notifications FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_worker('ingest');
CREATE TRIGGER notifications_idempotency_key BEFORE INSERT ON herald.notifications_rotating FOR EACH ROW WHEN ((new.idempotency_key IS NOT NULL)) EXECUTE FUNCTION herald.claim_idempotency_key();
CREATE TRIGGER notifications_refuse_oversized BEFORE INSERT ON herald.notifications_rotating FOR EACH ROW WHEN ((pg_column_size(new.*) > herald.max_notification_bytes())) EXECUTE FUNCTION herald.refuse_oversized_notification();

-- Row-level security policies
-- ---------------------------

CREATE POLICY "as privileges allow" ON herald.notifications AS PERMISSIVE FOR ALL TO PUBLIC
    USING (true)
    WITH CHECK (true);
CREATE POLICY "only apps granted in herald.producer_apps" ON herald.notifications AS RESTRICTIVE FOR INSERT TO herald_producer
    WITH CHECK ((app_id = ANY (( SELECT herald.producer_app_ids() AS producer_app_ids)::text[])));
CREATE POLICY "producers read their apps' rows only" ON herald.notifications AS RESTRICTIVE FOR SELECT TO herald_producer
    USING ((app_id = ANY (( SELECT herald.producer_app_ids() AS producer_app_ids)::text[])));
