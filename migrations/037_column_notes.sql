-- What every table and column of the herald schema holds, and why, in the catalog, where
-- `\d+ herald.<table>` shows it to an operator (and docs/schema/ to a reader). A table or column
-- added later says what it holds in the migration that adds it (SchemaSnapshotTests).

-- The queue: notifications, their deliveries and reports, and the work around them.
COMMENT ON TABLE herald.notifications IS
    'One row per notification a producer sent (herald.send, herald.send_push, a Live Activity call or a plain INSERT) or Herald made (a wake-up), kept with what became of it. The ingest worker''s durable queue (rows still received), partitioned by kept and then by generation of ids (herald.generations).';
COMMENT ON COLUMN herald.notifications.id IS
    'Herald''s id for it, drawn at INSERT; id >> 32 is its generation (herald.generations), whose partition holds it unless kept.';
COMMENT ON COLUMN herald.notifications.app_id IS
    'The app it is for (herald.apps.app_id); not a foreign key on purpose: ingest rejects an unknown app with a reason.';
COMMENT ON COLUMN herald.notifications.idempotency_key IS
    'The producer''s key, unique per app (herald.idempotency_keys): a repeat writes nothing and gets the first id. NULL: none; keys starting herald- are Herald''s (wake-ups).';
COMMENT ON COLUMN herald.notifications.user_ref IS
    'Target: every enabled device of this user (herald.devices.user_ref). Exactly one of user_ref, device_ids and topic is set; none for a Live Activity update or end.';
COMMENT ON COLUMN herald.notifications.device_ids IS
    'Target: the app''s own device ids (herald.devices.device_id); each one registered and enabled gets a delivery. NULL unless this is the target.';
COMMENT ON COLUMN herald.notifications.topic IS
    'Target: an FCM topic name, sent as one delivery of payload kind topic. NULL unless this is the target.';
COMMENT ON COLUMN herald.notifications.title IS
    'The title shown (a Live Activity event''s alert title; a start needs one). NULL: none.';
COMMENT ON COLUMN herald.notifications.body IS
    'The text shown under the title (a Live Activity event''s alert body). NULL: none.';
COMMENT ON COLUMN herald.notifications.data IS
    'The producer''s data: a JSON object of strings, sent beside Herald''s keys; ingest turns numbers and booleans into strings. NULL: none.';
COMMENT ON COLUMN herald.notifications.image_url IS
    'An https URL of an image to show with it (key image_url; a topic send''s notification image). NULL: none.';
COMMENT ON COLUMN herald.notifications.sound IS
    'The sound to play, as the platform names it (aps.sound on iOS, key sound on Android). NULL: none given.';
COMMENT ON COLUMN herald.notifications.badge IS
    'The number to show on the app''s icon (iOS aps.badge; HarmonyOS and Safari too). NULL: none sent.';
COMMENT ON COLUMN herald.notifications.android_channel_id IS
    'The Android notification channel the app shows it in (key channel_id). NULL: none given.';
COMMENT ON COLUMN herald.notifications.ios_category IS
    'iOS aps.category: the notification category whose actions the app registered. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_thread_id IS
    'iOS aps.thread-id: notifications with the same one are grouped together. NULL: none.';
COMMENT ON COLUMN herald.notifications.deep_link IS
    'A link the app opens when the notification is tapped (key deep_link; HarmonyOS and Safari open it themselves). NULL: none.';
COMMENT ON COLUMN herald.notifications.priority IS
    'high or normal (APNs priority 10 or 5, FCM priority, Web Push Urgency); NULL at INSERT: ingest writes the app''s default_priority.';
COMMENT ON COLUMN herald.notifications.ttl IS
    'How long it is worth delivering (0 to 28 days, from send_at or creation), as the producer gave it; ingest turns it into expires_at and sets it NULL.';
COMMENT ON COLUMN herald.notifications.expires_at IS
    'When it stops being worth delivering: the producer''s, or set by ingest from ttl or the app''s default_ttl. Deliveries not sent by then end expired.';
COMMENT ON COLUMN herald.notifications.collapse_key IS
    'Later notifications with the same key replace earlier ones (FCM collapse_key, apns-collapse-id, Web Push Topic). NULL: none.';
COMMENT ON COLUMN herald.notifications.send_at IS
    'When to send it, up to a year ahead: its deliveries are due then (their run_at). NULL: at once.';
COMMENT ON COLUMN herald.notifications.silent IS
    'A data-only push that shows nothing (an iOS background push; herald_silent on Android). Herald''s wake-ups are silent.';
COMMENT ON COLUMN herald.notifications.dry_run IS
    'Checked, never delivered: FCM and Huawei validate it (validate_only), Herald checks it for the others; its deliveries end validated.';
COMMENT ON COLUMN herald.notifications.state IS
    'What became of it, written by Herald: received (waiting for ingest), accepted (deliveries made), rejected, expired, no_devices, or superseded (a Live Activity event older than one already taken).';
COMMENT ON COLUMN herald.notifications.reason IS
    'Why it was rejected, expired, found no devices or was superseded, in words for the producer (a wake-up: what it is for). NULL otherwise.';
COMMENT ON COLUMN herald.notifications.created_at IS
    'When it was inserted (the inserting transaction''s time); Herald''s column, not the producer''s to write.';
COMMENT ON COLUMN herald.notifications.ingested_at IS
    'When ingest gave its verdict (state); NULL while received. A wake-up has it from the start.';
COMMENT ON COLUMN herald.notifications.origin IS
    'Who made it: producer, or wakeup (a silent push herald.reconcile sends an iOS device that missed notifications).';
COMMENT ON COLUMN herald.notifications.kept IS
    'Partition key: false in its generation''s partition; true once herald.retire_generation moved it to notifications_kept because it or one of its deliveries still waited.';
COMMENT ON COLUMN herald.notifications.ios_interruption_level IS
    'iOS aps.interruption-level: passive, active, time-sensitive or critical (ingest rejects others). NULL: not sent (iOS takes active).';
COMMENT ON COLUMN herald.notifications.ios_relevance_score IS
    'iOS aps.relevance-score, 0 to 1: which of the app''s notifications (or Live Activities) leads its summary. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_filter_criteria IS
    'iOS aps.filter-criteria: the Focus filter that lets it through. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_target_content_id IS
    'iOS aps.target-content-id: the window or content a tap brings forward. NULL: none.';
COMMENT ON COLUMN herald.notifications.android_direct_boot_ok IS
    'FCM android.direct_boot_ok: delivered to the app before the phone is unlocked after a restart. NULL: not sent.';
COMMENT ON COLUMN herald.notifications.android_proxy IS
    'For a topic send, FCM android.notification.proxy (allow, deny or if_priority_lowered): whether Google Play services may show it. NULL: FCM''s default.';
COMMENT ON COLUMN herald.notifications.activity_id IS
    'A Live Activity event''s activity: the app''s id for it (herald.live_activities.activity_id). NULL: no activity event, or a broadcast.';
COMMENT ON COLUMN herald.notifications.activity_event IS
    'A Live Activity event: start, update or end (herald.start_activity, update_activity, end_activity, broadcast_activity). NULL: none.';
COMMENT ON COLUMN herald.notifications.activity_attributes_type IS
    'A start''s ActivityAttributes type, as the app''s Swift names it (attributes-type). NULL for other events.';
COMMENT ON COLUMN herald.notifications.activity_attributes IS
    'A start''s ActivityAttributes as JSON (attributes; Herald adds herald_activity when sending). NULL for other events.';
COMMENT ON COLUMN herald.notifications.activity_content_state IS
    'The event''s ContentState as JSON (content-state); ingest gives an end without one the activity''s newest. NULL: none.';
COMMENT ON COLUMN herald.notifications.activity_stale_at IS
    'When the activity shows as stale (aps.stale-date). NULL: not set.';
COMMENT ON COLUMN herald.notifications.activity_dismiss_at IS
    'When an ended activity leaves the Lock Screen (aps.dismissal-date; a past time removes it at once). NULL: not set.';
COMMENT ON COLUMN herald.notifications.activity_event_at IS
    'When the event happened (aps.timestamp): the newest wins, an older one ends superseded. Unless given, the call''s time (or just after the newest event).';
COMMENT ON COLUMN herald.notifications.activity_channel IS
    'A broadcast''s channel name as the producer gave it (herald.broadcast_activity). NULL: not a broadcast.';
COMMENT ON COLUMN herald.notifications.broadcast_channel_id IS
    'The herald.broadcast_channels row ingest sent the broadcast to. NULL: not a broadcast, or none sent.';
COMMENT ON COLUMN herald.notifications.push_type IS
    'One of herald.push_types (widgets, voip, location, pushtotalk), set only by herald.send_push: its deliveries go to the devices'' tokens of that type. NULL: not such a push.';

COMMENT ON TABLE herald.deliveries IS
    'One row per notification and device (or token), or one for a topic or broadcast channel: the unit that is sent, with its attempts and outcome. The dispatch worker''s durable queue (rows queued, due at run_at), partitioned like herald.notifications.';
COMMENT ON COLUMN herald.deliveries.id IS
    'Its id (herald.deliveries_id_seq); id >> 32 is its generation (herald.generations), whose partition holds it unless kept.';
COMMENT ON COLUMN herald.deliveries.notification_id IS
    'The notification it sends (herald.notifications.id); not a foreign key, since both tables are partitioned.';
COMMENT ON COLUMN herald.deliveries.device_id IS
    'The device it goes to (herald.devices.id). NULL: a send to no device (a topic or a broadcast channel).';
COMMENT ON COLUMN herald.deliveries.payload_kind IS
    'What is sent, set from the platform or push type: android_data, ios_alert, ios_background, ios_wakeup, topic, web, live_activity, broadcast, harmony_alert, harmony_background, ios_widgets, ios_voip, ios_location or ios_pushtotalk. With the token''s kind it picks the route (herald.route_rules).';
COMMENT ON COLUMN herald.deliveries.state IS
    'queued (waiting, leased or backing off), sent (accepted by the provider), validated (a dry run), delivered (reported by the app), expired, cancelled (device or token gone, or superseded), token_invalid or failed (refused for good, or dead).';
COMMENT ON COLUMN herald.deliveries.attempts IS
    'Claims so far (a lease at birth by ingest counts one); a postponement gives it back, herald.redrive resets it. It goes dead once its 25th attempt fails.';
COMMENT ON COLUMN herald.deliveries.provider_message_id IS
    'The provider''s id for the sent message: FCM''s message name, the apns-id, a push service''s Location, Huawei''s request id. NULL: not sent.';
COMMENT ON COLUMN herald.deliveries.last_error IS
    'The latest error, or why it ended or waits (dispatch, the retry worker, ingest; herald.redrive prefixes redriven after:). NULL: none.';
COMMENT ON COLUMN herald.deliveries.error_history IS
    'Every error it met, oldest first, each prefixed with its time (YYYY-MM-DD HH24:MI:SS); empty when none.';
COMMENT ON COLUMN herald.deliveries.created_at IS
    'When it was made: by ingest, by herald.reconcile for a wake-up, or for a Live Activity token registered late.';
COMMENT ON COLUMN herald.deliveries.sent_at IS
    'When the provider''s answer accepting it came in (state sent or validated). NULL: not sent.';
COMMENT ON COLUMN herald.deliveries.delivered_at IS
    'When the app first reported it (delivered, seen or opened), set by herald.reconcile. NULL: not reported.';
COMMENT ON COLUMN herald.deliveries.seen_at IS
    'When the app first reported it seen (or opened), set by herald.reconcile. NULL: not reported so.';
COMMENT ON COLUMN herald.deliveries.finished_at IS
    'When it stopped being queued (answered, ended unsent, or dead). NULL while queued; herald.redrive clears it.';
COMMENT ON COLUMN herald.deliveries.opened_at IS
    'When the app first reported it opened (the user tapped it), set by herald.reconcile. NULL: not reported so.';
COMMENT ON COLUMN herald.deliveries.run_at IS
    'When a queued delivery is next due: send_at or its creation, a retry''s backoff, a postponement, or its lease''s end while locked_by holds it. Unused once not queued.';
COMMENT ON COLUMN herald.deliveries.locked_by IS
    'The worker holding its lease (HERALD_WORKER_ID, host:pid by default), from a claim or ingest''s lease at birth. NULL: none.';
COMMENT ON COLUMN herald.deliveries.dead_at IS
    'When it ran out of attempts (state failed); listed in herald.dead_jobs until herald.redrive clears it. NULL: not dead.';
COMMENT ON COLUMN herald.deliveries.provider_unique_id IS
    'APNs'' apns-unique-id, when it gives one (its development environment): the key to its delivery log in Apple''s Push Notifications Console. NULL otherwise.';
COMMENT ON COLUMN herald.deliveries.kept IS
    'Partition key: false in its generation''s partition; true once herald.retire_generation moved it to deliveries_kept (still queued, or dead within the retention).';
COMMENT ON COLUMN herald.deliveries.activity_token_id IS
    'A Live Activity delivery''s token (herald.activity_tokens.id), on device_id. NULL for other payload kinds.';
COMMENT ON COLUMN herald.deliveries.push_type_token_id IS
    'For a widgets, VoIP, location or Push to Talk push: the device''s token of that type (herald.push_type_tokens.id), sent to instead of its own. NULL otherwise.';

COMMENT ON TABLE herald.delivery_reports IS
    'One row per report an app sent back for a delivery (delivered, seen or opened), recorded by herald.report_delivery and applied in batches by the reconcile worker through a reconcile job each. Partitioned by kept and then with its delivery''s generation.';
COMMENT ON COLUMN herald.delivery_reports.id IS
    'Its id (herald.delivery_reports_id_seq); its reconcile job names it (herald.jobs.ref).';
COMMENT ON COLUMN herald.delivery_reports.reference IS
    'The opaque reference (herald_report) the app sent back: the delivery and device ids with an HMAC tag.';
COMMENT ON COLUMN herald.delivery_reports.report_kind IS
    'delivered (it arrived), seen (it was shown) or opened (the user tapped it); one report per delivery and kind.';
COMMENT ON COLUMN herald.delivery_reports.reported_at IS
    'When the report was recorded; herald.reconcile copies it to the delivery''s delivered_at, seen_at or opened_at.';
COMMENT ON COLUMN herald.delivery_reports.processed_at IS
    'When the reconcile worker applied it (herald.reconcile). NULL: not applied yet.';
COMMENT ON COLUMN herald.delivery_reports.outcome IS
    'What applying it did: applied, the only value herald.reconcile writes. NULL: not applied yet.';
COMMENT ON COLUMN herald.delivery_reports.delivery_id IS
    'The delivery reported (herald.deliveries.id), from the reference; not a foreign key. Unless kept, the report sits in that delivery''s generation.';
COMMENT ON COLUMN herald.delivery_reports.device_id IS
    'The device the reference was issued to (herald.devices.id): the delivery''s device.';
COMMENT ON COLUMN herald.delivery_reports.kept IS
    'Partition key: false in its delivery''s generation; true in delivery_reports_kept (beside a kept delivery, or moved there unapplied when its generation retired).';

COMMENT ON TABLE herald.idempotency_keys IS
    'Each app''s idempotency keys and the notification each first named, kept for the retention. It keeps a key unique across every partition of herald.notifications: the insert trigger claims it (herald.claim_idempotency_key) before the row is written, and a used key skips the row.';
COMMENT ON COLUMN herald.idempotency_keys.app_id IS
    'The app the key belongs to (herald.notifications.app_id): keys are unique per app.';
COMMENT ON COLUMN herald.idempotency_keys.idempotency_key IS
    'The key as the producer gave it, or Herald''s own herald-wakeup-<id> for a wake-up.';
COMMENT ON COLUMN herald.idempotency_keys.notification_id IS
    'The notification that first used the key: what a repeated send returns instead of writing a row.';
COMMENT ON COLUMN herald.idempotency_keys.created_at IS
    'That notification''s created_at; herald.prune_records deletes the key once past the retention and its notification is gone.';

COMMENT ON TABLE herald.generations IS
    'The id ranges herald.notifications and herald.deliveries are partitioned by (herald.delivery_reports by delivery_id): one a HERALD_PARTITION_INTERVAL, dropped a retention after it closed. Made ahead, opened and retired by the pruner (herald.open_generation, retire_generation, drop_generation).';
COMMENT ON COLUMN herald.generations.generation IS
    'The generation''s number N: its ids start at N << 32, and its partitions are <table>_gN.';
COMMENT ON COLUMN herald.generations.first_id IS
    'Its first id, N << 32 (the lowest bigint for the generation holding a migrated database''s old rows).';
COMMENT ON COLUMN herald.generations.end_id IS
    'The first id past it, (N + 1) << 32: its range excludes end_id.';
COMMENT ON COLUMN herald.generations.opened_at IS
    'When the id sequences moved into it (herald.open_generation). NULL: made ahead, not in use yet; -infinity for a migrated database''s old rows.';
COMMENT ON COLUMN herald.generations.closed_at IS
    'When the id sequences moved on; NULL while open or ahead. The generation is retired once this is older than HERALD_RETENTION.';

COMMENT ON TABLE herald.redrives IS
    'One row per herald.redrive call that brought dead work back: when, by whom, which jobs and deliveries, and the operator''s note. An audit trail; Herald does not prune it.';
COMMENT ON COLUMN herald.redrives.id IS
    'The redrive''s id.';
COMMENT ON COLUMN herald.redrives.redriven_at IS
    'When the redrive ran.';
COMMENT ON COLUMN herald.redrives.redriven_by IS
    'The login (session_user) that called herald.redrive.';
COMMENT ON COLUMN herald.redrives.job_ids IS
    'The dead herald.jobs rows it brought back to ready, attempts reset; empty when none.';
COMMENT ON COLUMN herald.redrives.note IS
    'The note the operator gave herald.redrive (why: an outage fixed, ...). NULL: none.';
COMMENT ON COLUMN herald.redrives.delivery_ids IS
    'The dead herald.deliveries it brought back to queued, attempts reset; empty when none.';

COMMENT ON TABLE herald.jobs IS
    'The durable job queue for work other than ingest and dispatch: one row per job, claimed in batches with a lease by the workers of its kind. Ready, then running, deleted when done; ready again after a retry or lease rescue; dead after its last attempt, until herald.redrive.';
COMMENT ON COLUMN herald.jobs.id IS
    'The job''s id.';
COMMENT ON COLUMN herald.jobs.kind IS
    'The worker that takes it: reconcile (one per delivery report), channels (a broadcast channel to make or delete at APNs), sleep (diagnostic), or a kind a deployment adds.';
COMMENT ON COLUMN herald.jobs.ref IS
    'The row it is about: herald.delivery_reports.id for reconcile, herald.broadcast_channels.id for channels. NULL: none (reconcile and channels make such a job dead).';
COMMENT ON COLUMN herald.jobs.payload IS
    'The job''s arguments as a JSON object, for kinds that take some (sleep reads ms); reconcile and channels leave it {}.';
COMMENT ON COLUMN herald.jobs.state IS
    'ready (due at run_at), running (leased to locked_by until locked_until) or dead (out of attempts or given up, until herald.redrive).';
COMMENT ON COLUMN herald.jobs.run_at IS
    'When a ready job is due: its insert, a time the inserter chose, a retry''s backoff or a postponement; lease rescue and herald.redrive set it to now.';
COMMENT ON COLUMN herald.jobs.attempts IS
    'Claims so far, a running one included; a postponement or a release at shutdown gives one back, herald.redrive resets it.';
COMMENT ON COLUMN herald.jobs.max_attempts IS
    'Attempts before a failing job goes dead: 25 unless its inserter sets another.';
COMMENT ON COLUMN herald.jobs.locked_by IS
    'The worker holding the lease (HERALD_WORKER_ID, host:pid by default). NULL unless running.';
COMMENT ON COLUMN herald.jobs.locked_until IS
    'When the lease ends, set only while running; past it the retry worker returns the job to ready (dead when out of attempts).';
COMMENT ON COLUMN herald.jobs.last_error IS
    'Why the last attempt failed, was postponed or lost its lease (prefixed redriven after: by herald.redrive). NULL: never failed.';
COMMENT ON COLUMN herald.jobs.created_at IS
    'When the job was inserted.';
COMMENT ON COLUMN herald.jobs.dead_at IS
    'When it went dead; set only while state is dead, cleared by herald.redrive.';

COMMENT ON TABLE herald.wakeups IS
    'One row per silent wake-up herald.reconcile sent an iOS device whose report showed it missed notifications (APNs keeps only the newest). The exclusion constraint keeps one per device per quiet period across all daemons; pruned by herald.prune_records.';
COMMENT ON COLUMN herald.wakeups.id IS
    'The wake-up''s id; its notification''s idempotency key is herald-wakeup-<id>.';
COMMENT ON COLUMN herald.wakeups.device_id IS
    'The iOS device woken (herald.devices.id); the row goes with the device.';
COMMENT ON COLUMN herald.wakeups.report_id IS
    'The report that revealed the gap (herald.delivery_reports.id, the newest of the batch''s for the device).';
COMMENT ON COLUMN herald.wakeups.missed IS
    'How many of the device''s alert deliveries (ios_alert) were sent but unreported: what the woken app fetches (herald.pending_notifications).';
COMMENT ON COLUMN herald.wakeups.notification_id IS
    'The silent notification (origin wakeup) herald.reconcile made for it, with one ios_wakeup delivery; set in the same transaction.';
COMMENT ON COLUMN herald.wakeups.created_at IS
    'When herald.reconcile decided the wake-up: the start of the device''s quiet period.';
COMMENT ON COLUMN herald.wakeups.quiet_until IS
    'The quiet period''s end (created_at plus HERALD_WAKEUP_INTERVAL): no other wake-up for the device before it.';

-- Apps, their providers and how deliveries are routed.
-- herald.apps
COMMENT ON TABLE herald.apps IS
    'One row per app that sends through Herald, added by operators; each provider''s settings of it have a table.';
COMMENT ON COLUMN herald.apps.app_id IS
    'The app''s name, chosen by the operator, as producers and Herald''s tables name it.';
COMMENT ON COLUMN herald.apps.fcm_project_id IS
    'Kept for one release: now herald.app_fcm.project_id, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.credentials_file IS
    'Kept for one release: now herald.app_fcm.credentials_file, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.default_ttl IS
    'How long ingest lets a notification without ttl or expires_at live (a push type''s default_ttl first).';
COMMENT ON COLUMN herald.apps.default_priority IS
    'The priority ingest gives a notification that names none: ''high'' or ''normal''.';
COMMENT ON COLUMN herald.apps.created_at IS
    'When the app was added.';
COMMENT ON COLUMN herald.apps.vapid_key_file IS
    'Kept for one release: now herald.app_webpush.vapid_key_file, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.vapid_subject IS
    'Kept for one release: now herald.app_webpush.vapid_subject, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.ios_transport IS
    'How iOS devices registered without a token kind are reached: ''fcm'' or ''apns'' (needs herald.app_apns).';
COMMENT ON COLUMN herald.apps.apns_environment IS
    'Kept for one release: now herald.app_apns.environment, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_bundle_id IS
    'Kept for one release: now herald.app_apns.bundle_id, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_team_id IS
    'Kept for one release: now herald.app_apns.team_id, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_key_id IS
    'Kept for one release: now herald.app_apns.key_id, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_key_file IS
    'Kept for one release: now herald.app_apns.key_file, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_certificate_file IS
    'Kept for one release: now herald.app_apns.certificate_file, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.apns_certificate_expires_at IS
    'Kept for one release: now herald.app_apns.certificate_expires_at, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.web_push_hosts IS
    'Kept for one release: now herald.app_webpush.hosts, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.web_push_private_addresses IS
    'Kept for one release: now herald.app_webpush.private_addresses, kept in step both ways by triggers.';
COMMENT ON COLUMN herald.apps.settings_changed_at IS
    'Set when a provider''s settings of the app change, so the daemons reread them at the next claim; NULL: not yet.';

-- herald.app_fcm
COMMENT ON TABLE herald.app_fcm IS
    'An app''s FCM settings (Android, topics, iOS through FCM), one row per app; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_fcm.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_fcm.project_id IS
    'The Firebase project the app''s messages go through; every app in it shares its quota.';
COMMENT ON COLUMN herald.app_fcm.credentials_file IS
    'Path to the service-account JSON file the daemons read; NULL: GOOGLE_APPLICATION_CREDENTIALS.';

-- herald.app_apns
COMMENT ON TABLE herald.app_apns IS
    'An app''s settings for sending straight to APNs, one row per app that does; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_apns.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_apns.environment IS
    'Which APNs: ''production'' (api.push.apple.com) or ''development'' (api.sandbox.push.apple.com).';
COMMENT ON COLUMN herald.app_apns.bundle_id IS
    'The app''s bundle id, its apns-topic; NULL: deliveries to APNs wait as a problem of scope apns.';
COMMENT ON COLUMN herald.app_apns.team_id IS
    'Token-based authentication: the Apple team of the key; used with key_id and key_file.';
COMMENT ON COLUMN herald.app_apns.key_id IS
    'Token-based authentication: the APNs key''s id; used with team_id and key_file.';
COMMENT ON COLUMN herald.app_apns.key_file IS
    'Token-based authentication: path to the .p8 key the daemons read; used before any certificate.';
COMMENT ON COLUMN herald.app_apns.certificate_file IS
    'Without a key: path to the push certificate (PEM with its key, or a .p12 without a password).';
COMMENT ON COLUMN herald.app_apns.certificate_expires_at IS
    'When the certificate expires, as the daemon read it; herald.app_problems warns 30 days ahead.';

-- herald.app_webpush
COMMENT ON TABLE herald.app_webpush IS
    'An app''s Web Push settings for browsers, one row per app that sends to them; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_webpush.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_webpush.vapid_key_file IS
    'Path to the VAPID private key (herald vapid-key makes one); NULL: browser deliveries wait (scope web).';
COMMENT ON COLUMN herald.app_webpush.vapid_subject IS
    'The contact push services see for this sender: a mailto: or https: URL.';
COMMENT ON COLUMN herald.app_webpush.hosts IS
    'Push service hosts browsers'' endpoints may name: host, *.domain or *; NULL: herald.default_web_push_hosts().';
COMMENT ON COLUMN herald.app_webpush.private_addresses IS
    'Whether endpoints may be loopback, private or link-local addresses; checked again on connect.';

-- herald.app_hms
COMMENT ON TABLE herald.app_hms IS
    'An app''s Huawei Push Kit credentials, one row per app that uses it; set by operators, read by the daemons.';
COMMENT ON COLUMN herald.app_hms.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_hms.client_id IS
    'The app''s OAuth 2.0 client id in AppGallery Connect (its app id, digits).';
COMMENT ON COLUMN herald.app_hms.client_secret_file IS
    'Path to a file holding the client secret, read by the daemons; the secret never enters the database.';

-- herald.app_harmony
COMMENT ON TABLE herald.app_harmony IS
    'An app''s HarmonyOS Push Kit setup, one row per app that uses it; set by operators, read by the daemons.';
COMMENT ON COLUMN herald.app_harmony.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_harmony.service_account_file IS
    'Path to the service-account key file (JSON, naming the project), read by the daemons.';
COMMENT ON COLUMN herald.app_harmony.category IS
    'The category its notifications go as; any but MARKETING needs Huawei''s right to classify notifications.';

-- herald.app_unifiedpush
COMMENT ON TABLE herald.app_unifiedpush IS
    'An app''s UnifiedPush setup, one row per app; without one it takes no endpoint. Sent if HERALD_UNIFIEDPUSH=true.';
COMMENT ON COLUMN herald.app_unifiedpush.app_id IS
    'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_unifiedpush.vapid_key_file IS
    'Path to the VAPID private key; its public half is what the app gives its distributor.';
COMMENT ON COLUMN herald.app_unifiedpush.vapid_subject IS
    'The contact distributors see for this sender: a mailto: or https: URL.';
COMMENT ON COLUMN herald.app_unifiedpush.hosts IS
    'Distributor hosts endpoints may name: host, *.domain or * (the default: any public host).';
COMMENT ON COLUMN herald.app_unifiedpush.private_addresses IS
    'Whether endpoints may be loopback, private, link-local or metadata addresses; checked again on connect.';

-- herald.producer_apps
COMMENT ON TABLE herald.producer_apps IS
    'Which roles may act for which apps as producers, one row per grant, written by operators (herald.acts_for).';
COMMENT ON COLUMN herald.producer_apps.producer IS
    'The role granted: its member logins act for the app; herald_producer itself means every producer.';
COMMENT ON COLUMN herald.producer_apps.app_id IS
    'The app it may act for (herald.apps); the grant goes with it.';
COMMENT ON COLUMN herald.producer_apps.granted_at IS
    'When the grant was made.';

-- herald.app_config_problems
COMMENT ON TABLE herald.app_config_problems IS
    'An app''s configuration scope failing now, written by dispatch: routes needing it wait, but for a probe a minute.';
COMMENT ON COLUMN herald.app_config_problems.app_id IS
    'The app whose configuration fails (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_config_problems.scope IS
    'Which of its configurations fails (herald.config_scopes).';
COMMENT ON COLUMN herald.app_config_problems.problem IS
    'What failed, in the daemon''s or the provider''s words.';
COMMENT ON COLUMN herald.app_config_problems.since IS
    'When this problem was first seen; reset when the problem''s words change.';
COMMENT ON COLUMN herald.app_config_problems.failed_at IS
    'When a send last confirmed it: the next probe goes out a minute after.';

-- herald.config_scopes
COMMENT ON TABLE herald.config_scopes IS
    'The configurations an app can get wrong, one row per scope; rows belong to the migrations.';
COMMENT ON COLUMN herald.config_scopes.scope IS
    'The scope''s name, as herald.app_config_problems and herald.routes.scopes name it.';
COMMENT ON COLUMN herald.config_scopes.waiting IS
    'What waits while it fails, as herald.app_problems says it.';

-- herald.providers
COMMENT ON TABLE herald.providers IS
    'The push services Herald sends through, one row per provider; rows belong to the migrations.';
COMMENT ON COLUMN herald.providers.provider IS
    'The provider''s name, as the daemon''s registry of providers and herald.routes.provider name it.';
COMMENT ON COLUMN herald.providers.settings IS
    'The table or view of its settings, one row per app by app_id; NULL: no settings of apps.';

-- herald.routes
COMMENT ON TABLE herald.routes IS
    'The ways out, one row per route: its provider and the scopes it needs; rows belong to the migrations.';
COMMENT ON COLUMN herald.routes.route IS
    'The route''s name, as herald.claim_sends returns it for each delivery.';
COMMENT ON COLUMN herald.routes.provider IS
    'The provider that sends it (herald.providers).';
COMMENT ON COLUMN herald.routes.description IS
    'The route in words, as operators read it in a delivery''s reason for waiting.';
COMMENT ON COLUMN herald.routes.scopes IS
    'The herald.config_scopes it needs: its deliveries wait while any of them fails.';

-- herald.route_targets
COMMENT ON TABLE herald.route_targets IS
    'The routing rule: a delivery''s route by payload and token kind (no row: not sent); rows belong to migrations.';
COMMENT ON COLUMN herald.route_targets.payload_kind IS
    'The delivery''s payload kind (herald.deliveries.payload_kind).';
COMMENT ON COLUMN herald.route_targets.token_kind IS
    'The kind of the token it goes to (herald.token_kinds); NULL: no device (a topic, a broadcast channel).';
COMMENT ON COLUMN herald.route_targets.route IS
    'The route it takes (herald.routes).';

-- herald.token_kinds
COMMENT ON TABLE herald.token_kinds IS
    'What a push token can be, one row per kind, and how registration checks it; rows belong to the migrations.';
COMMENT ON COLUMN herald.token_kinds.token_kind IS
    'The kind''s name, as herald.devices.token_kind and herald.push_type_tokens.token_kind hold it.';
COMMENT ON COLUMN herald.token_kinds.platforms IS
    'The platforms (herald.platforms) whose devices may hold a token of this kind.';
COMMENT ON COLUMN herald.token_kinds.description IS
    'The kind in words, as herald.register_device''s errors list it.';
COMMENT ON COLUMN herald.token_kinds.shape IS
    'A regular expression every token of the kind must match at registration; NULL: any token.';
COMMENT ON COLUMN herald.token_kinds.shape_description IS
    'The shape in words, as the error refusing a token says it; NULL exactly when shape is.';
COMMENT ON COLUMN herald.token_kinds.lowercase IS
    'Whether registration stores the token in lower case (hex tokens).';
COMMENT ON COLUMN herald.token_kinds.endpoint_policy IS
    'For a Web Push subscription: the view or table of each app''s allowed hosts; NULL: not a subscription.';

-- herald.platforms
COMMENT ON TABLE herald.platforms IS
    'The platforms a device can be, one row each, read by registration and ingest; rows belong to the migrations.';
COMMENT ON COLUMN herald.platforms.platform IS
    'The platform''s name, as herald.devices.platform holds it.';
COMMENT ON COLUMN herald.platforms.description IS
    'The platform in words, as herald.register_device''s error lists it.';
COMMENT ON COLUMN herald.platforms.payload_kind IS
    'The payload kind ingest gives a delivery to a device of this platform.';
COMMENT ON COLUMN herald.platforms.silent_payload_kind IS
    'The payload kind ingest gives a delivery of a silent notification to a device of this platform.';
COMMENT ON COLUMN herald.platforms.default_token_kind IS
    'The token kind a device holds when registered without one (iOS of an ''apns'' app: apns_device_token).';

-- herald.push_types
COMMENT ON TABLE herald.push_types IS
    'APNs'' other push types, sent with herald.send_push, one row each; rows belong to the migrations.';
COMMENT ON COLUMN herald.push_types.push_type IS
    'The type''s name, as APNs names it (apns-push-type) and herald.send_push takes it.';
COMMENT ON COLUMN herald.push_types.description IS
    'The type in words, as herald.send_push''s error lists it.';
COMMENT ON COLUMN herald.push_types.payload_kind IS
    'The payload kind of its deliveries (herald.deliveries.payload_kind).';
COMMENT ON COLUMN herald.push_types.token_kind IS
    'The token kind it goes to, registered beside the device in herald.push_type_tokens.';
COMMENT ON COLUMN herald.push_types.max_payload_bytes IS
    'APNs'' limit in bytes for the JSON sent (data and Herald''s keys); ingest rejects more.';
COMMENT ON COLUMN herald.push_types.takes_data IS
    'Whether the producer''s data is sent; when false, ingest rejects a notification with data.';
COMMENT ON COLUMN herald.push_types.may_be_normal IS
    'Whether priority ''normal'' (APNs'' 5) may be asked for; when false, ingest rejects it.';
COMMENT ON COLUMN herald.push_types.default_ttl IS
    'How long it is tried when the producer gives no ttl or expires_at; NULL: the app''s default_ttl.';
COMMENT ON COLUMN herald.push_types.max_ttl IS
    'The longest it may be tried; ingest rejects a ttl or expires_at beyond it.';

-- herald.fcm_quotas
COMMENT ON TABLE herald.fcm_quotas IS
    'Each FCM project''s sends, drawn a second at a time by every daemon on the database; paused after a 429';
COMMENT ON COLUMN herald.fcm_quotas.project_id IS
    'The FCM project (herald.app_fcm.project_id); its row is made by its first draw or by an operator.';
COMMENT ON COLUMN herald.fcm_quotas.per_second IS
    'Sends a second for the whole fleet, set by an operator; NULL: the daemons'' HERALD_FCM_RATE_LIMIT.';
COMMENT ON COLUMN herald.fcm_quotas.window_start IS
    'The second (of the server''s clock) being drawn from; -infinity before the first draw.';
COMMENT ON COLUMN herald.fcm_quotas.drawn IS
    'Sends the daemons drew from that second; what they do not spend within it is lost.';
COMMENT ON COLUMN herald.fcm_quotas.paused_until IS
    'After a 429, nothing is drawn until then (FCM''s Retry-After); set by daemons, ends by itself.';
COMMENT ON COLUMN herald.fcm_quotas.paused_reason IS
    'FCM''s words for the latest pause; NULL: never paused.';

-- herald.route_saturation
COMMENT ON TABLE herald.route_saturation IS
    'Routes whose window of sends in flight was full, one row per route and daemon; herald status lists recent ones.';
COMMENT ON COLUMN herald.route_saturation.app_id IS
    'The app whose route it is (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.route_saturation.route IS
    'The route (herald.routes).';
COMMENT ON COLUMN herald.route_saturation.origin IS
    'For a Web Push subscription, the push service''s origin (a route of its own); '''' for other routes.';
COMMENT ON COLUMN herald.route_saturation.worker IS
    'The daemon that saw it, by its HERALD_WORKER_ID (by default hostname:pid).';
COMMENT ON COLUMN herald.route_saturation.since IS
    'When this episode began: the first full window after two quiet minutes.';
COMMENT ON COLUMN herald.route_saturation.seen_at IS
    'When the window was last seen full; written at most once a minute, deleted after a day unseen.';
COMMENT ON COLUMN herald.route_saturation.in_flight IS
    'The route''s sends in flight on that daemon when it was last seen full.';
COMMENT ON COLUMN herald.route_saturation.postponed IS
    'Deliveries the full window postponed in this episode, not as attempts (one may count at each claim).';

-- herald.secrets
COMMENT ON TABLE herald.secrets IS
    'Secrets every daemon shares, one row each, made by herald migrate; daemons read them, producers cannot.';
COMMENT ON COLUMN herald.secrets.name IS
    'The secret''s name: report_hmac signs the delivery report references payloads carry.';
COMMENT ON COLUMN herald.secrets.value IS
    'The secret, from PostgreSQL''s random source; updating it rotates it, and older references stop opening.';
COMMENT ON COLUMN herald.secrets.created_at IS
    'When the row was made; an update of the value leaves it.';
COMMENT ON COLUMN herald.secrets.inner_pad IS
    'HMAC-SHA256''s inner padded key, generated from value (herald.hmac_pads) so claims and reports need not build it.';
COMMENT ON COLUMN herald.secrets.outer_pad IS
    'HMAC-SHA256''s outer padded key, generated from value (herald.hmac_pads) so claims and reports need not build it.';

-- herald.schema_migrations
COMMENT ON TABLE herald.schema_migrations IS
    'The numbered migrations applied here, one row each, written by herald migrate; the daemon only reads it.';
COMMENT ON COLUMN herald.schema_migrations.version IS
    'The migration''s number (the NNN of migrations/NNN_name.sql).';
COMMENT ON COLUMN herald.schema_migrations.name IS
    'The migration''s file name, without .sql.';
COMMENT ON COLUMN herald.schema_migrations.checksum IS
    'The md5 of the file as applied; herald migrate warns when the file has changed since.';
COMMENT ON COLUMN herald.schema_migrations.applied_at IS
    'When it was applied.';

-- herald.schema_functions
COMMENT ON TABLE herald.schema_functions IS
    'The function files applied here, one row each, written by herald migrate; the daemon only reads it.';
COMMENT ON COLUMN herald.schema_functions.file IS
    'The file''s name in migrations/functions/.';
COMMENT ON COLUMN herald.schema_functions.checksum IS
    'The md5 of the file as last applied; herald migrate applies it again when its text differs.';
COMMENT ON COLUMN herald.schema_functions.applied_at IS
    'When that text was applied.';

-- Devices, their other tokens, Live Activities and broadcast channels.
COMMENT ON TABLE herald.devices IS
    'One row per app installation: its push token and the token''s kind, its user, and whether it is enabled (herald.register_device, herald.unregister_device). A device whose token died or moved, or that logged out, is disabled, never deleted: operators see when and why, and registering enables it again.';
COMMENT ON COLUMN herald.devices.id IS
    'Herald''s id for the device, which herald.deliveries, herald.wakeups, herald.activity_tokens and herald.push_type_tokens name as device_id, and which every report reference carries.';
COMMENT ON COLUMN herald.devices.app_id IS
    'The app the device belongs to (herald.apps); device_id and push_token are each unique within it.';
COMMENT ON COLUMN herald.devices.device_id IS
    'The producer''s own stable id for the installation, unique per app: what herald.register_device, herald.unregister_device and a notification''s device_ids name it by.';
COMMENT ON COLUMN herald.devices.platform IS
    'What the device is, one of herald.platforms (android, ios, web, harmony): it decides the payload kind of the deliveries ingest makes for it and which token kinds it may hold.';
COMMENT ON COLUMN herald.devices.push_token IS
    'The device''s own token as herald.register_device took it: an FCM, APNs (hex, lower case), Huawei or HarmonyOS token, or a Web Push or UnifiedPush subscription''s endpoint. Unique per app; NULL once another device of the app registered it (token_moved).';
COMMENT ON COLUMN herald.devices.user_ref IS
    'The producer''s id for the device''s user: a notification sent to a user_ref goes to every enabled device that has it. NULL: a device of no user, reached only by its device_id.';
COMMENT ON COLUMN herald.devices.disabled_at IS
    'When the device was disabled; NULL while it is enabled. A disabled device gets no new deliveries and its waiting ones are cancelled; herald.register_device or herald.enable_device enables it again.';
COMMENT ON COLUMN herald.devices.disabled_cause IS
    'Why the device is disabled, to group by: token_invalid (a provider declared its token dead; registering that token again keeps it disabled), logout (herald.unregister_device), token_moved (another device of the app registered its token) or operator (set by hand; no Herald function sets it). NULL while enabled.';
COMMENT ON COLUMN herald.devices.disabled_reason IS
    'Why the device is disabled, in words: the provider''s error, the reason given to herald.unregister_device (''logged out'' unless said), or which device registered its token. NULL while enabled.';
COMMENT ON COLUMN herald.devices.registered_at IS
    'When herald.register_device was last called for the device (a first registration or a token refresh). Dispatch does not disable a device for a dead token when it registered after the time the provider says that token stopped being valid.';
COMMENT ON COLUMN herald.devices.last_wakeup_at IS
    'When the reconcile worker (herald.reconcile) last queued a silent wake-up for this iOS device because notifications sent to it went unreported; NULL if never. herald.wakeups has each wake-up.';
COMMENT ON COLUMN herald.devices.web_p256dh IS
    'For a subscription token (token_kind web_subscription or unifiedpush): the subscription''s P-256 public key, 65 bytes uncompressed (RFC 8291), that dispatch encrypts each push to. NULL for other token kinds.';
COMMENT ON COLUMN herald.devices.web_auth IS
    'For a subscription token (token_kind web_subscription or unifiedpush): the subscription''s 16-byte authentication secret (RFC 8291), used with web_p256dh to encrypt each push. NULL for other token kinds.';
COMMENT ON COLUMN herald.devices.token_kind IS
    'What push_token is, one of herald.token_kinds; with a delivery''s payload kind it picks the route (herald.route_rules). Given to herald.register_device, or else the platform''s default (apns_device_token on iOS when the app''s ios_transport is apns).';
COMMENT ON COLUMN herald.devices.registration_started_at IS
    'When the device''s current registration began: its first herald.register_device, or the first after a logout or for another user_ref (a token refresh keeps it). Its report references (herald.pending_notifications) read only deliveries made since.';

COMMENT ON TABLE herald.push_type_tokens IS
    'One row per device and push type: the device''s token for APNs'' widget, VoIP, location or Push to Talk pushes (herald.register_push_type_token), which herald.send_push sends to. Disabling one leaves the device enabled.';
COMMENT ON COLUMN herald.push_type_tokens.id IS
    'Herald''s id for the token, which herald.deliveries.push_type_token_id names.';
COMMENT ON COLUMN herald.push_type_tokens.device_id IS
    'The device it belongs to (herald.devices.id): a disabled device is sent none of its pushes, and the token is deleted with the device.';
COMMENT ON COLUMN herald.push_type_tokens.token_kind IS
    'The token''s kind, which names its push type in herald.push_types: apns_widgets_token, apns_voip_token, apns_location_token or apns_pushtotalk_token. One row per device and kind.';
COMMENT ON COLUMN herald.push_type_tokens.token IS
    'The token as the app''s framework gave it, in hex, lower case; live on one device of the app at a time. Operators cannot read it (herald.notification_journey shows its hint).';
COMMENT ON COLUMN herald.push_type_tokens.registered_at IS
    'When this token was registered by herald.register_push_type_token (first, or replacing or re-enabling the type''s previous token). Dispatch does not disable a token registered after the time APNs says it stopped being valid.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_at IS
    'When the token was disabled; NULL while it is live. Ingest sends nothing of its type to the device while it is disabled, and retention deletes it once disabled for longer than the retention period.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_cause IS
    'Why it is disabled: token_invalid (dispatch: APNs declared it dead, and registering the same token again keeps it disabled), unregistered (herald.unregister_push_type_token) or token_moved (another device of the app registered it). NULL while live.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_reason IS
    'Why it is disabled, in words: APNs'' reason, ''the app unregistered it'', or which device registered it again. NULL while live.';

COMMENT ON TABLE herald.live_activities IS
    'One row per Live Activity of an app, with its state and newest content: made by ingest for a herald.start_activity, or by herald.register_activity_token for one the app started itself. Its events are notifications (herald.activity_events), its tokens rows of herald.activity_tokens.';
COMMENT ON COLUMN herald.live_activities.id IS
    'Herald''s id for the activity, which herald.activity_tokens and herald.activity_events name as live_activity_id.';
COMMENT ON COLUMN herald.live_activities.app_id IS 'The app it belongs to (herald.apps); deleted with the app.';
COMMENT ON COLUMN herald.live_activities.activity_id IS
    'The app''s name for it (an order id, a match id), used once per app: a second start with it is rejected. Events name the activity by it, and the app finds it in the attributes as herald_activity.';
COMMENT ON COLUMN herald.live_activities.attributes_type IS
    'The app''s ActivityAttributes type, as ActivityKit names it (attributes-type): a start goes to push-to-start tokens of this type, and an update token registered for the activity must name it too.';
COMMENT ON COLUMN herald.live_activities.user_ref IS
    'The user it was started for (the start''s user_ref; NULL when started on devices named), or, when the app started it, the user_ref of the device that registered its update token.';
COMMENT ON COLUMN herald.live_activities.started_by IS
    'producer: herald.start_activity started it on the user''s devices; app: the app started it on the device itself and registered its update token.';
COMMENT ON COLUMN herald.live_activities.state IS
    'active, or ended once its end event was ingested: after that a newer event is rejected and an older one superseded.';
COMMENT ON COLUMN herald.live_activities.content_state IS
    'The ContentState of the newest event ingested, as JSON the app decodes: what the devices show. An end given none carries this one; NULL for an activity the app started, until its first event.';
COMMENT ON COLUMN herald.live_activities.event_at IS
    'The time of the newest event ingested (its aps.timestamp): an older event is superseded, not sent. NULL for an activity the app started, until its first event.';
COMMENT ON COLUMN herald.live_activities.last_notification_id IS
    'The notification of the newest event ingested (herald.notifications.id): an update token registered later is sent that update or end at once, while unexpired, to catch up. NULL until the first event.';
COMMENT ON COLUMN herald.live_activities.stale_at IS
    'When the devices show the activity as stale, as the newest event that gave one set it; NULL when none did.';
COMMENT ON COLUMN herald.live_activities.dismiss_at IS
    'When the ended activity leaves the Lock Screen, as its end gave it (a past time: at once); NULL when the newest event gave none.';
COMMENT ON COLUMN herald.live_activities.created_at IS
    'When Herald made the row: at the ingest of its start, or when the app registered the first update token of one it started.';
COMMENT ON COLUMN herald.live_activities.ended_at IS
    'When its end was ingested; NULL while active. Retention deletes an ended activity after the retention period, and one never ended once no device can still show it, with its update tokens and events.';

COMMENT ON TABLE herald.activity_tokens IS
    'One row per Live Activity token of a device: its push-to-start token for an activity type, or a running activity''s update token (herald.register_activity_token). A token replaced or ended stays, with when and why, until retention deletes it.';
COMMENT ON COLUMN herald.activity_tokens.id IS
    'Herald''s id for the token, which herald.deliveries.activity_token_id names.';
COMMENT ON COLUMN herald.activity_tokens.device_id IS
    'The iPhone it is on (herald.devices.id): a disabled device is sent nothing through it, and the token is deleted with the device.';
COMMENT ON COLUMN herald.activity_tokens.kind IS
    'push_to_start: the app''s token for starting activities of attributes_type on the device (ActivityKit''s pushToStartToken); update: one running activity''s token (its pushToken).';
COMMENT ON COLUMN herald.activity_tokens.attributes_type IS
    'The ActivityAttributes type it is for, as ActivityKit names it: a start of that type goes to the push-to-start tokens; an update token''s is its activity''s.';
COMMENT ON COLUMN herald.activity_tokens.live_activity_id IS
    'An update token''s activity (herald.live_activities.id); NULL for a push-to-start token.';
COMMENT ON COLUMN herald.activity_tokens.token IS
    'The APNs token as ActivityKit gave it, in hex, lower case; live on one device of the app at a time. Operators cannot read it.';
COMMENT ON COLUMN herald.activity_tokens.registered_at IS
    'When herald.register_activity_token registered it; a new token of the same kind replaces it as a new row.';
COMMENT ON COLUMN herald.activity_tokens.last_delivery_id IS
    'An update token''s newest delivery (herald.deliveries.id), set by ingest or by the catch-up send at registration: an older one still waiting is superseded by it. NULL for a push-to-start token, and before any.';
COMMENT ON COLUMN herald.activity_tokens.ended_at IS
    'When the token ended; NULL while it is live. An ended token takes no new event (one ended by its activity''s end still takes that end), and retention deletes it after the retention period.';
COMMENT ON COLUMN herald.activity_tokens.ended_cause IS
    'Why it ended: activity_ended (its activity''s end was ingested), dismissed or unregistered (herald.unregister_activity_token, for an update or a push-to-start token), replaced (a new token took its place) or token_invalid (the provider declared it dead). NULL while live.';
COMMENT ON COLUMN herald.activity_tokens.ended_reason IS
    'Why it ended, in words: the provider''s reason, the end''s notification, what the app said, or which device registered it again. NULL while live.';

COMMENT ON TABLE herald.activity_events IS
    'Which notifications are each Live Activity''s events (start, update, end): one row per activity and notification, written by ingest, so that herald.live_activity_sends lists an activity''s life without an index on herald.notifications.activity_id.';
COMMENT ON COLUMN herald.activity_events.live_activity_id IS
    'The activity (herald.live_activities.id); its rows are deleted with it.';
COMMENT ON COLUMN herald.activity_events.notification_id IS
    'The notification of one of its events (herald.notifications.id), recorded at ingest whatever its verdict (accepted, no_devices, superseded, expired, rejected).';

COMMENT ON TABLE herald.broadcast_channels IS
    'One row per APNs broadcast channel (iOS 18) of an app, created and deleted by the producer (herald.create_channel, herald.delete_channel) and made and deleted at APNs by the channels worker. A broadcast (herald.broadcast_activity) is one delivery to every Live Activity subscribed to the channel.';
COMMENT ON COLUMN herald.broadcast_channels.id IS
    'Herald''s id for the channel, which the channels worker''s job (herald.jobs.ref) and herald.notifications.broadcast_channel_id name.';
COMMENT ON COLUMN herald.broadcast_channels.app_id IS
    'The app it belongs to (herald.apps), whose APNs setup makes it and sends to it; deleted with the app.';
COMMENT ON COLUMN herald.broadcast_channels.name IS
    'The app''s name for it (a match, a flight), as herald.create_channel and herald.broadcast_activity take it: one creating or active channel per name and app, free again once that one is deleting, deleted or failed.';
COMMENT ON COLUMN herald.broadcast_channels.stores_latest IS
    'Its message storage policy at APNs, fixed when created: true, APNs keeps the most recent message for offline devices; false, it keeps none (and allows a larger publishing budget).';
COMMENT ON COLUMN herald.broadcast_channels.state IS
    'creating (the channels worker is making it at APNs; broadcasts wait), active (channel_id set), deleting (herald.delete_channel; being deleted at APNs), deleted, or failed (APNs refused it, its job ran out of attempts, or APNs did not know it at a broadcast; reason says).';
COMMENT ON COLUMN herald.broadcast_channels.channel_id IS
    'APNs'' id for the channel, which the app subscribes its Live Activities to (herald.channels returns it); NULL until the channels worker made it at APNs.';
COMMENT ON COLUMN herald.broadcast_channels.reason IS
    'Why the channel is as it is: why its last request to APNs failed (while its job retries, or for good), ''deleted by the producer'', or that APNs no longer knew it. NULL once made active.';
COMMENT ON COLUMN herald.broadcast_channels.event_at IS
    'The time of the newest broadcast ingested (its aps.timestamp): an older one is superseded, not sent. NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.last_notification_id IS
    'The newest broadcast''s notification (herald.notifications.id); NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.last_delivery_id IS
    'The newest broadcast''s delivery (herald.deliveries.id): an older one still waiting is cancelled as superseded, by ingest or when dispatch claims it. NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.created_at IS 'When herald.create_channel made the row.';
COMMENT ON COLUMN herald.broadcast_channels.changed_at IS
    'When its state or reason last changed: by herald.delete_channel, the channels worker, or dispatch failing a channel APNs did not know.';
