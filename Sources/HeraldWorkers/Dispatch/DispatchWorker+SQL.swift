extension DispatchWorker {
    enum SQL {
        /// Everything needed to send a batch of deliveries, in one query.
        static let load = """
            SELECT d.id, d.notification_id, d.state, d.payload_kind, dev.id, dev.push_token,
                   CASE WHEN dev.id IS NOT NULL AND dev.disabled_at IS NOT NULL
                        THEN coalesce(dev.disabled_reason, 'disabled') END,
                   n.app_id, a.fcm_project_id, a.credentials_file, n.topic, n.title, n.body, n.data::text,
                   n.image_url, n.sound, n.badge, n.android_channel_id, n.ios_category, n.ios_thread_id, n.deep_link,
                   n.priority, n.expires_at, n.collapse_key, n.silent, n.dry_run, a.config_error_at
            FROM herald.deliveries d
            JOIN herald.notifications n ON n.id = d.notification_id
            JOIN herald.apps a ON a.app_id = n.app_id
            LEFT JOIN herald.devices dev ON dev.id = d.device_id
            WHERE d.id = ANY($1::bigint[])
            """

        /// Records outcomes: $1 ids, $2 states, $3 FCM message names, $4 errors, $5 whether an
        /// attempt was made, $6 when FCM answered (Unix seconds: a number binds without formatting a
        /// timestamp string per delivery). Only deliveries still queued change.
        static let record = """
            UPDATE herald.deliveries AS d
            SET state = u.state,
                provider_message_id = coalesce(u.name, d.provider_message_id),
                last_error = coalesce(u.error, d.last_error),
                error_history = CASE WHEN u.error IS NULL THEN d.error_history
                                     ELSE d.error_history || format('%s %s', to_char(u.at, 'YYYY-MM-DD HH24:MI:SS'), u.error) END,
                attempts = d.attempts + CASE WHEN u.attempted THEN 1 ELSE 0 END,
                sent_at = CASE WHEN u.state IN ('sent', 'validated') THEN u.at ELSE d.sent_at END,
                finished_at = CASE WHEN u.state <> 'queued' THEN u.at END
            FROM (SELECT id, state, name, error, attempted, to_timestamp(seconds) AS at
                  FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::float8[])
                       AS u(id, state, name, error, attempted, seconds)) AS u
            WHERE d.id = u.id AND d.state = 'queued'
            """

        /// Soft-disables devices whose token FCM declared dead: $1 device ids, $2 the tokens
        /// that were sent to, $3 reasons, $4 now. A device that registered a new token since
        /// is left alone.
        static let disableDevices = """
            UPDATE herald.devices AS dev
            SET disabled_at = $4::timestamptz, disabled_cause = 'token_invalid', disabled_reason = u.reason
            FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(id, token, reason)
            WHERE dev.id = u.id AND dev.push_token = u.token AND dev.disabled_at IS NULL
            """

        /// Sets ($2 an error) or clears ($2 NULL) each app's ($1) configuration problem; $3 now.
        static let appStatus = """
            UPDATE herald.apps AS a
            SET config_error = u.error, config_error_at = CASE WHEN u.error IS NULL THEN NULL ELSE $3::timestamptz END
            FROM unnest($1::text[], $2::text[]) AS u(app, error)
            WHERE a.app_id = u.app AND a.config_error IS DISTINCT FROM u.error
            """

        static let secret = "SELECT value FROM herald.secrets WHERE name = 'report_hmac'"
    }
}
