-- Release 0.11.0 (2026-12-03) drops what release 0.10.0 kept for its rolling upgrade
-- (CHANGELOG.md says what an operator upgrading must do first):
--
-- - herald.apps' columns of the built-in providers' settings (fcm_project_id, credentials_file,
--   apns_…, vapid_…, web_push_…), which migration 031 moved to herald.app_fcm, herald.app_apns
--   and herald.app_webpush, and the two triggers that kept them in step both ways. Those tables
--   already hold every setting (the triggers copied each write), so nothing is lost; they renew
--   their app's version through herald.provider_settings_changed, as every other provider's
--   table does.
-- - The CHECK on herald.apps that direct APNs has a bundle id and a key or a certificate, which
--   read those columns: an app that sends iOS through APNs without them has a configuration
--   problem of its own (herald.app_problems), as every provider's missing settings are.
-- - herald.record_sends' two older signatures (the twenty arrays, and the six arguments without
--   push type tokens), which daemons built before migrations 31 and 36 called.
-- - herald.app_setups' copies of the old columns, which it now returns as NULLs (a daemon of
--   0.10.0 reads only app_id, app_version and provider_settings, by name, but prepared
--   `SELECT *` of it: its result type stays for this release, functions/dispatch.sql says why).
--   Replaced here, with the text of functions/dispatch.sql, because its old body reads the
--   columns this drops: between this migration and the function files, a running daemon would
--   find it broken. (A database made through the numbered migrations alone has neither it nor
--   the old signatures of herald.record_sends yet: IF EXISTS.)
DROP TRIGGER provider_settings_from_apps ON herald.apps;
DROP TRIGGER apps_from_app_fcm ON herald.app_fcm;
DROP TRIGGER apps_from_app_apns ON herald.app_apns;
DROP TRIGGER apps_from_app_webpush ON herald.app_webpush;
DROP FUNCTION herald.sync_provider_settings_from_apps();
DROP FUNCTION herald.sync_apps_from_provider_settings();
CREATE TRIGGER app_fcm_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_fcm
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_apns_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_apns
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();
CREATE TRIGGER app_webpush_changed AFTER INSERT OR UPDATE OR DELETE ON herald.app_webpush
    FOR EACH ROW EXECUTE FUNCTION herald.provider_settings_changed();

CREATE OR REPLACE FUNCTION herald.app_setups(apps text[]) RETURNS TABLE (app_id text, app_version text,
    fcm_project_id text, credentials_file text, vapid_key_file text, vapid_subject text, web_push_hosts text[],
    web_push_private_addresses boolean, apns_environment text, apns_bundle_id text, apns_team_id text,
    apns_key_id text, apns_key_file text, apns_certificate_file text, provider_settings jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    settings text;
BEGIN
    SELECT string_agg(format('%L, (SELECT to_jsonb(s) - ''app_id'' FROM %s s WHERE s.app_id = a.app_id)',
                             p.provider, p.settings), ', ' ORDER BY p.provider)
    INTO settings
    FROM herald.providers p WHERE has_table_privilege(p.settings, 'SELECT') IS TRUE;
    RETURN QUERY EXECUTE format(
        $query$
        SELECT a.app_id, a.xmin::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text[], NULL::boolean,
               NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
               coalesce((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(jsonb_build_object(%s)) e
                         WHERE e.value <> 'null'::jsonb), '{}')
        FROM herald.apps a
        WHERE a.app_id = ANY($1)
        $query$, coalesce(settings, '')) USING apps;
END;
$$;
REVOKE ALL ON FUNCTION herald.app_setups(text[]) FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT EXECUTE ON FUNCTION herald.app_setups(text[]) TO herald_daemon;

-- herald.app_problems read the old columns until functions/operators.sql gave it the providers'
-- tables (a database made through the numbered migrations alone has that older text): made
-- again with the file's text.
DROP VIEW herald.app_problems;
CREATE VIEW herald.app_problems AS
SELECT p.app_id, f.project_id AS fcm_project_id, p.problem AS config_error, p.since AS config_error_at, p.scope,
       p.failed_at, s.waiting
FROM herald.app_config_problems p
JOIN herald.config_scopes s ON s.scope = p.scope
LEFT JOIN herald.app_fcm f ON f.app_id = p.app_id
UNION ALL
SELECT a.app_id, f.project_id,
       CASE WHEN a.certificate_expires_at <= now()
            THEN format('the APNs certificate %s expired at %s: every send to APNs fails until it is renewed',
                        a.certificate_file, a.certificate_expires_at)
            ELSE format('the APNs certificate %s expires at %s, in %s days: renew it',
                        a.certificate_file, a.certificate_expires_at,
                        ceil(extract(epoch FROM a.certificate_expires_at - now()) / 86400))
       END,
       a.certificate_expires_at - interval '30 days', 'apns_certificate', NULL,
       'nothing yet'
FROM herald.app_apns a
LEFT JOIN herald.app_fcm f ON f.app_id = a.app_id
WHERE a.certificate_file IS NOT NULL AND a.certificate_expires_at < now() + interval '30 days';
REVOKE ALL ON herald.app_problems FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT INSERT, SELECT, UPDATE, DELETE ON herald.app_problems TO herald_daemon;
GRANT SELECT ON herald.app_problems TO herald_operator;
COMMENT ON VIEW herald.app_problems IS
    'Each app''s failing configurations, and APNs push certificates that expire within 30 days';

ALTER TABLE herald.apps DROP CONSTRAINT "direct APNs needs a bundle id and a key or a certificate";
ALTER TABLE herald.apps
    DROP COLUMN fcm_project_id, DROP COLUMN credentials_file, DROP COLUMN vapid_key_file, DROP COLUMN vapid_subject,
    DROP COLUMN apns_environment, DROP COLUMN apns_bundle_id, DROP COLUMN apns_team_id, DROP COLUMN apns_key_id,
    DROP COLUMN apns_key_file, DROP COLUMN apns_certificate_file, DROP COLUMN apns_certificate_expires_at,
    DROP COLUMN web_push_hosts, DROP COLUMN web_push_private_addresses;

DROP FUNCTION IF EXISTS herald.record_sends(bigint[], text[], text[], text[], float8[], float8[], boolean[],
    boolean[], text, bigint[], text[], text[], timestamptz, text[], text[], text[], text[], float8[], bigint[], text[]);
DROP FUNCTION IF EXISTS herald.record_sends(herald.send_outcome[], text, timestamptz, herald.dead_token[],
    herald.dead_token[], herald.config_problem[]);
