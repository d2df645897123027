-- The schema after migration 55, for a new database: `herald migrate` applies this file,
-- then migrations/functions/, then after_functions.sql (migrations/README.md, "Two paths to
-- one schema"). Generated from a database the numbered migrations built; never edited by
-- hand. The notes on tables and columns are their COMMENT ONs.

-- Roles, the schema's grants, and what new objects grant
-- ------------------------------------------------------

DO $$
BEGIN
    CREATE ROLE herald_producer NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- created by another database's migration, or concurrently
END;
$$;
DO $$
BEGIN
    CREATE ROLE herald_operator NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- created by another database's migration, or concurrently
END;
$$;
DO $$
BEGIN
    CREATE ROLE herald_daemon NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- created by another database's migration, or concurrently
END;
$$;

GRANT USAGE ON SCHEMA herald TO herald_producer;
GRANT USAGE ON SCHEMA herald TO herald_operator;
GRANT USAGE ON SCHEMA herald TO herald_daemon;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT DELETE, INSERT, SELECT, UPDATE ON TABLES TO herald_daemon;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT EXECUTE ON FUNCTIONS TO herald_daemon;
ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT SELECT, USAGE ON SEQUENCES TO herald_daemon;

-- Composite types (what some functions return)
-- --------------------------------------------

CREATE TYPE herald.config_problem AS (
    app_id text,
    scope text,
    problem text
);

CREATE TYPE herald.dead_token AS (
    id bigint,
    token text,
    reason text,
    since double precision
);

CREATE TYPE herald.fcm_delivery_day AS (
    day date,
    analytics_label text,
    accepted bigint,
    data jsonb
);

CREATE TYPE herald.provider_receipt AS (
    delivery_id bigint,
    token text,
    message_id text,
    delivered boolean,
    meaning text,
    at double precision,
    effect text,
    reference text
);

CREATE TYPE herald.send_outcome AS (
    delivery_id bigint,
    state text,
    message_name text,
    unique_id text,
    error text,
    answered_at double precision,
    due_again double precision,
    given_back boolean,
    dead boolean
);


-- Sequences
-- ---------

CREATE SEQUENCE herald.deliveries_id_seq START WITH 4294967296;
CREATE SEQUENCE herald.delivery_reports_id_seq;

-- herald.apps
-- -----------

CREATE TABLE herald.apps (
    app_id text NOT NULL,
    default_ttl interval DEFAULT '1 day'::interval NOT NULL,
    default_priority text DEFAULT 'high'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    ios_transport text DEFAULT 'fcm'::text NOT NULL,
    settings_changed_at timestamp with time zone,
    default_message_class text DEFAULT 'marketing'::text NOT NULL,
    CONSTRAINT apps_pkey PRIMARY KEY (app_id),
    CONSTRAINT apps_app_id_check CHECK ((app_id <> ''::text)),
    CONSTRAINT apps_default_message_class_check CHECK ((default_message_class = ANY (ARRAY['service'::text, 'marketing'::text]))),
    CONSTRAINT apps_default_priority_check CHECK ((default_priority = ANY (ARRAY['high'::text, 'normal'::text]))),
    CONSTRAINT apps_default_ttl_check CHECK (((default_ttl >= '00:00:00'::interval) AND (default_ttl <= '28 days'::interval))),
    CONSTRAINT apps_ios_transport_check CHECK ((ios_transport = ANY (ARRAY['fcm'::text, 'apns'::text])))
);
COMMENT ON TABLE herald.apps IS 'One row per app that sends through Herald, added by operators; each provider''s settings of it have a table.';
COMMENT ON COLUMN herald.apps.app_id IS 'The app''s name, chosen by the operator, as producers and Herald''s tables name it.';
COMMENT ON COLUMN herald.apps.default_ttl IS 'How long ingest lets a notification without ttl or expires_at live (a push type''s default_ttl first).';
COMMENT ON COLUMN herald.apps.default_priority IS 'The priority ingest gives a notification that names none: ''high'' or ''normal''.';
COMMENT ON COLUMN herald.apps.created_at IS 'When the app was added.';
COMMENT ON COLUMN herald.apps.ios_transport IS 'How iOS devices registered without a token kind are reached: ''fcm'' or ''apns'' (needs herald.app_apns).';
COMMENT ON COLUMN herald.apps.settings_changed_at IS 'Set when a provider''s settings of the app change, so the daemons reread them at the next claim; NULL: not yet.';
COMMENT ON COLUMN herald.apps.default_message_class IS 'The message class of a notification that names none: marketing (the default) or service.';
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.apps TO herald_operator;


-- herald.app_apns
-- ---------------

CREATE TABLE herald.app_apns (
    app_id text NOT NULL,
    environment text DEFAULT 'production'::text NOT NULL,
    bundle_id text,
    team_id text,
    key_id text,
    key_file text,
    certificate_file text,
    certificate_expires_at timestamp with time zone,
    CONSTRAINT app_apns_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_apns_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_apns_environment_check CHECK ((environment = ANY (ARRAY['production'::text, 'development'::text])))
);
COMMENT ON TABLE herald.app_apns IS 'An app''s settings for sending straight to APNs, one row per app that does; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_apns.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_apns.environment IS 'Which APNs: ''production'' (api.push.apple.com) or ''development'' (api.sandbox.push.apple.com).';
COMMENT ON COLUMN herald.app_apns.bundle_id IS 'The app''s bundle id, its apns-topic; NULL: deliveries to APNs wait as a problem of scope apns.';
COMMENT ON COLUMN herald.app_apns.team_id IS 'Token-based authentication: the Apple team of the key; used with key_id and key_file.';
COMMENT ON COLUMN herald.app_apns.key_id IS 'Token-based authentication: the APNs key''s id; used with team_id and key_file.';
COMMENT ON COLUMN herald.app_apns.key_file IS 'Token-based authentication: path to the .p8 key the daemons read; used before any certificate.';
COMMENT ON COLUMN herald.app_apns.certificate_file IS 'Without a key: path to the push certificate (PEM with its key, or a .p12 without a password).';
COMMENT ON COLUMN herald.app_apns.certificate_expires_at IS 'When the certificate expires, as the daemon read it; herald.app_problems warns 30 days ahead.';
REVOKE ALL ON herald.app_apns FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_apns TO herald_operator;
GRANT SELECT ON herald.app_apns TO herald_daemon;
GRANT UPDATE (certificate_expires_at) ON herald.app_apns TO herald_daemon;


-- herald.app_fcm
-- --------------

CREATE TABLE herald.app_fcm (
    app_id text NOT NULL,
    project_id text NOT NULL,
    credentials_file text,
    android_app_id text,
    CONSTRAINT app_fcm_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_fcm_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_fcm_android_app_id_check CHECK ((android_app_id ~ '^1:[0-9]+:android:[0-9a-f]+$'::text)),
    CONSTRAINT app_fcm_project_id_check CHECK ((project_id <> ''::text))
);
COMMENT ON TABLE herald.app_fcm IS 'An app''s FCM settings (Android, topics, iOS through FCM), one row per app; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_fcm.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_fcm.project_id IS 'The Firebase project the app''s messages go through; every app in it shares its quota.';
COMMENT ON COLUMN herald.app_fcm.credentials_file IS 'Path to the service-account JSON file the daemons read; NULL: GOOGLE_APPLICATION_CREDENTIALS.';
COMMENT ON COLUMN herald.app_fcm.android_app_id IS 'The app''s Firebase App ID for Android (1:<project number>:android:<hash>): with it, a daemon reads the FCM Data API''s delivery data for the app once a day (herald.fcm_delivery_days). NULL: not read.';
REVOKE ALL ON herald.app_fcm FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_fcm TO herald_operator;
GRANT SELECT ON herald.app_fcm TO herald_daemon;


-- herald.app_harmony
-- ------------------

CREATE TABLE herald.app_harmony (
    app_id text NOT NULL,
    service_account_file text NOT NULL,
    category text DEFAULT 'MARKETING'::text NOT NULL,
    receipt_username text,
    receipt_key_file text,
    receipt_id text,
    CONSTRAINT app_harmony_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_harmony_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT "a receipt configuration has a user name and a key" CHECK (((receipt_username IS NULL) = (receipt_key_file IS NULL))),
    CONSTRAINT app_harmony_category_check CHECK ((category = ANY (ARRAY['IM'::text, 'VOIP'::text, 'SUBSCRIPTION'::text, 'TRAVEL'::text, 'HEALTH'::text, 'WORK'::text, 'ACCOUNT'::text, 'EXPRESS'::text, 'FINANCE'::text, 'DEVICE_REMINDER'::text, 'MAIL'::text, 'MARKETING'::text]))),
    CONSTRAINT app_harmony_receipt_id_check CHECK ((receipt_id ~ '^[A-Za-z0-9_-]{1,64}$'::text)),
    CONSTRAINT app_harmony_receipt_key_file_check CHECK ((receipt_key_file <> ''::text)),
    CONSTRAINT app_harmony_receipt_username_check CHECK ((receipt_username ~ '^[^[:cntrl:]]{1,128}$'::text)),
    CONSTRAINT app_harmony_service_account_file_check CHECK ((service_account_file <> ''::text))
);
COMMENT ON TABLE herald.app_harmony IS 'An app''s HarmonyOS Push Kit setup, one row per app that uses it; set by operators, read by the daemons.';
COMMENT ON COLUMN herald.app_harmony.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_harmony.service_account_file IS 'Path to the service-account key file (JSON, naming the project), read by the daemons.';
COMMENT ON COLUMN herald.app_harmony.category IS 'The category its service notifications go as (marketing ones go as MARKETING); any but MARKETING needs Huawei''s right to classify notifications.';
COMMENT ON COLUMN herald.app_harmony.receipt_username IS 'The callback user name of the app''s receipt configuration (V2) in AppGallery Connect: with receipt_key_file, receipts posted to /v1/receipts/harmony/{app} are checked and recorded. NULL: receipts are refused.';
COMMENT ON COLUMN herald.app_harmony.receipt_key_file IS 'A file holding the receipt configuration''s callback key, read by the daemons'' endpoints; the key never enters the database. NULL with receipt_username.';
COMMENT ON COLUMN herald.app_harmony.receipt_id IS 'The receipt configuration''s id (AppGallery Connect), sent with every message as pushOptions.receiptId. NULL: the app''s default receipt configuration.';
REVOKE ALL ON herald.app_harmony FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_harmony TO herald_operator;
GRANT SELECT ON herald.app_harmony TO herald_daemon;


-- herald.app_hms
-- --------------

CREATE TABLE herald.app_hms (
    app_id text NOT NULL,
    client_id text NOT NULL,
    client_secret_file text NOT NULL,
    receipt_username text,
    receipt_key_file text,
    receipt_id text,
    CONSTRAINT app_hms_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_hms_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT "a receipt configuration has a user name and a key" CHECK (((receipt_username IS NULL) = (receipt_key_file IS NULL))),
    CONSTRAINT app_hms_client_id_check CHECK ((client_id ~ '^[0-9]{1,64}$'::text)),
    CONSTRAINT app_hms_client_secret_file_check CHECK ((client_secret_file <> ''::text)),
    CONSTRAINT app_hms_receipt_id_check CHECK ((receipt_id ~ '^[A-Za-z0-9_-]{1,64}$'::text)),
    CONSTRAINT app_hms_receipt_key_file_check CHECK ((receipt_key_file <> ''::text)),
    CONSTRAINT app_hms_receipt_username_check CHECK ((receipt_username ~ '^[^[:cntrl:]]{1,128}$'::text))
);
COMMENT ON TABLE herald.app_hms IS 'An app''s Huawei Push Kit credentials, one row per app that uses it; set by operators, read by the daemons.';
COMMENT ON COLUMN herald.app_hms.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_hms.client_id IS 'The app''s OAuth 2.0 client id in AppGallery Connect (its app id, digits).';
COMMENT ON COLUMN herald.app_hms.client_secret_file IS 'Path to a file holding the client secret, read by the daemons; the secret never enters the database.';
COMMENT ON COLUMN herald.app_hms.receipt_username IS 'The callback user name of the app''s receipt configuration in AppGallery Connect: with receipt_key_file, receipts posted to /v1/receipts/hms/{app} are checked and recorded. NULL: receipts are refused.';
COMMENT ON COLUMN herald.app_hms.receipt_key_file IS 'A file holding the receipt configuration''s callback key, read by the daemons'' endpoints; the key never enters the database. NULL with receipt_username.';
COMMENT ON COLUMN herald.app_hms.receipt_id IS 'The receipt configuration''s id (AppGallery Connect), sent with every message as android.receipt_id so its receipts go to that configuration''s URL. NULL: the app''s default receipt configuration.';
REVOKE ALL ON herald.app_hms FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_hms TO herald_operator;
GRANT SELECT ON herald.app_hms TO herald_daemon;


-- herald.app_honor
-- ----------------

CREATE TABLE herald.app_honor (
    app_id text NOT NULL,
    honor_app_id text NOT NULL,
    client_id text NOT NULL,
    client_secret_file text NOT NULL,
    CONSTRAINT app_honor_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_honor_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_honor_client_id_check CHECK ((client_id ~ '^[A-Za-z0-9_.-]{1,128}$'::text)),
    CONSTRAINT app_honor_client_secret_file_check CHECK ((client_secret_file <> ''::text)),
    CONSTRAINT app_honor_honor_app_id_check CHECK ((honor_app_id ~ '^[0-9]{1,64}$'::text))
);
COMMENT ON TABLE herald.app_honor IS 'An app''s Honor Push setup, one row per app that sends to Honor phones.';
COMMENT ON COLUMN herald.app_honor.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_honor.honor_app_id IS 'The app''s id at Honor Push (digits), as its send URL names it.';
COMMENT ON COLUMN herald.app_honor.client_id IS 'The push service''s OAuth 2.0 Client ID (Honor''s console), not the app id.';
COMMENT ON COLUMN herald.app_honor.client_secret_file IS 'A file holding the Client Secret, read by the daemon; the secret never enters the database.';
REVOKE ALL ON herald.app_honor FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_honor TO herald_operator;
GRANT SELECT ON herald.app_honor TO herald_daemon;


-- herald.app_oppo
-- ---------------

CREATE TABLE herald.app_oppo (
    app_id text NOT NULL,
    app_key text NOT NULL,
    master_secret_file text NOT NULL,
    region text DEFAULT 'china'::text NOT NULL,
    service_channel_id text,
    marketing_channel_id text,
    service_category text DEFAULT 'ACCOUNT'::text NOT NULL,
    CONSTRAINT app_oppo_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_oppo_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_oppo_app_key_check CHECK ((app_key ~ '^[A-Za-z0-9]{1,64}$'::text)),
    CONSTRAINT app_oppo_marketing_channel_id_check CHECK ((marketing_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'::text)),
    CONSTRAINT app_oppo_master_secret_file_check CHECK ((master_secret_file <> ''::text)),
    CONSTRAINT app_oppo_region_check CHECK ((region = ANY (ARRAY['china'::text, 'international'::text]))),
    CONSTRAINT app_oppo_service_category_check CHECK ((service_category = ANY (ARRAY['IM'::text, 'ACCOUNT'::text, 'DEVICE_REMINDER'::text, 'ORDER'::text, 'TODO'::text, 'SUBSCRIPTION'::text]))),
    CONSTRAINT app_oppo_service_channel_id_check CHECK ((service_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'::text))
);
COMMENT ON TABLE herald.app_oppo IS 'An app''s OPPO Push setup, one row per app that sends to OPPO, OnePlus and realme phones.';
COMMENT ON COLUMN herald.app_oppo.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_oppo.app_key IS 'The app''s AppKey at OPPO Push (not its AppId), as the auth request sends it.';
COMMENT ON COLUMN herald.app_oppo.master_secret_file IS 'A file holding the app''s MasterSecret (OPPO''s push platform), read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_oppo.region IS 'Where the app''s phones are, which decides OPPO Push''s host: china (the default) or international.';
COMMENT ON COLUMN herald.app_oppo.service_channel_id IS 'The private channel (通讯与服务) the app registered with OPPO, for its service notifications; NULL: they go through the public channel.';
COMMENT ON COLUMN herald.app_oppo.marketing_channel_id IS 'A public channel the app registered with OPPO, for its marketing notifications; NULL: OPPO''s default one.';
COMMENT ON COLUMN herald.app_oppo.service_category IS 'The OPPO category of the app''s service notifications, one of its service ones: IM, ACCOUNT (the default), DEVICE_REMINDER, ORDER, TODO or SUBSCRIPTION; marketing ones are MARKETING.';
REVOKE ALL ON herald.app_oppo FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_oppo TO herald_operator;
GRANT SELECT ON herald.app_oppo TO herald_daemon;


-- herald.app_unifiedpush
-- ----------------------

CREATE TABLE herald.app_unifiedpush (
    app_id text NOT NULL,
    vapid_key_file text NOT NULL,
    vapid_subject text NOT NULL,
    hosts text[] DEFAULT '{*}'::text[] NOT NULL,
    private_addresses boolean DEFAULT false NOT NULL,
    CONSTRAINT app_unifiedpush_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_unifiedpush_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_unifiedpush_vapid_key_file_check CHECK ((vapid_key_file <> ''::text)),
    CONSTRAINT app_unifiedpush_vapid_subject_check CHECK ((vapid_subject ~ '^(mailto:|https://).'::text))
);
COMMENT ON TABLE herald.app_unifiedpush IS 'An app''s UnifiedPush setup, one row per app; without one it takes no endpoint. Sent if HERALD_UNIFIEDPUSH=true.';
COMMENT ON COLUMN herald.app_unifiedpush.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_unifiedpush.vapid_key_file IS 'Path to the VAPID private key; its public half is what the app gives its distributor.';
COMMENT ON COLUMN herald.app_unifiedpush.vapid_subject IS 'The contact distributors see for this sender: a mailto: or https: URL.';
COMMENT ON COLUMN herald.app_unifiedpush.hosts IS 'Distributor hosts endpoints may name: host, *.domain or * (the default: any public host).';
COMMENT ON COLUMN herald.app_unifiedpush.private_addresses IS 'Whether endpoints may be loopback, private, link-local or metadata addresses; checked again on connect.';
REVOKE ALL ON herald.app_unifiedpush FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_unifiedpush TO herald_operator;
GRANT SELECT ON herald.app_unifiedpush TO herald_daemon;


-- herald.app_vivo
-- ---------------

CREATE TABLE herald.app_vivo (
    app_id text NOT NULL,
    vivo_app_id text NOT NULL,
    app_key text NOT NULL,
    app_secret_file text NOT NULL,
    service_category text NOT NULL,
    marketing_category text DEFAULT 'MARKETING'::text NOT NULL,
    test_mode boolean DEFAULT false NOT NULL,
    CONSTRAINT app_vivo_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_vivo_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_vivo_app_key_check CHECK ((app_key ~ '^[A-Za-z0-9-]{1,128}$'::text)),
    CONSTRAINT app_vivo_app_secret_file_check CHECK ((app_secret_file <> ''::text)),
    CONSTRAINT app_vivo_marketing_category_check CHECK ((marketing_category = ANY (ARRAY['NEWS'::text, 'CONTENT'::text, 'MARKETING'::text, 'SOCIAL'::text]))),
    CONSTRAINT app_vivo_service_category_check CHECK ((service_category = ANY (ARRAY['IM'::text, 'ACCOUNT'::text, 'TODO'::text, 'DEVICE_REMINDER'::text, 'ORDER'::text, 'SUBSCRIPTION'::text]))),
    CONSTRAINT app_vivo_vivo_app_id_check CHECK ((vivo_app_id ~ '^[0-9]{1,18}$'::text))
);
COMMENT ON TABLE herald.app_vivo IS 'An app''s vivo Push setup, one row per app that sends to vivo phones.';
COMMENT ON COLUMN herald.app_vivo.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_vivo.vivo_app_id IS 'The app''s AppID at vivo Push (digits).';
COMMENT ON COLUMN herald.app_vivo.app_key IS 'The app''s AppKey at vivo Push (not secret: the AppSecret signs with it).';
COMMENT ON COLUMN herald.app_vivo.app_secret_file IS 'A file holding the AppSecret, read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_vivo.service_category IS 'The system-message category (classification 1) of the app''s service notifications: IM, ACCOUNT, TODO, DEVICE_REMINDER, ORDER or SUBSCRIPTION, as vivo approved for the app.';
COMMENT ON COLUMN herald.app_vivo.marketing_category IS 'The operation-message category (classification 0) of its marketing notifications: NEWS, CONTENT, MARKETING (the default) or SOCIAL.';
COMMENT ON COLUMN herald.app_vivo.test_mode IS 'Send with pushMode 1: only to the test phones entered in vivo''s console (an app under review can send no other way).';
REVOKE ALL ON herald.app_vivo FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_vivo TO herald_operator;
GRANT SELECT ON herald.app_vivo TO herald_daemon;


-- herald.app_webpush
-- ------------------

CREATE TABLE herald.app_webpush (
    app_id text NOT NULL,
    vapid_key_file text,
    vapid_subject text,
    hosts text[],
    private_addresses boolean DEFAULT false NOT NULL,
    CONSTRAINT app_webpush_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_webpush_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_webpush_vapid_subject_check CHECK (((vapid_subject ~~ 'mailto:%'::text) OR (vapid_subject ~~ 'https://%'::text)))
);
COMMENT ON TABLE herald.app_webpush IS 'An app''s Web Push settings for browsers, one row per app that sends to them; set by operators, read by daemons.';
COMMENT ON COLUMN herald.app_webpush.app_id IS 'The app (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_webpush.vapid_key_file IS 'Path to the VAPID private key (herald vapid-key makes one); NULL: browser deliveries wait (scope web).';
COMMENT ON COLUMN herald.app_webpush.vapid_subject IS 'The contact push services see for this sender: a mailto: or https: URL.';
COMMENT ON COLUMN herald.app_webpush.hosts IS 'Push service hosts browsers'' endpoints may name: host, *.domain or *; NULL: herald.default_web_push_hosts().';
COMMENT ON COLUMN herald.app_webpush.private_addresses IS 'Whether endpoints may be loopback, private or link-local addresses; checked again on connect.';
REVOKE ALL ON herald.app_webpush FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_webpush TO herald_operator;
GRANT SELECT ON herald.app_webpush TO herald_daemon;


-- herald.app_xiaomi
-- -----------------

CREATE TABLE herald.app_xiaomi (
    app_id text NOT NULL,
    app_secret_file text NOT NULL,
    package_name text NOT NULL,
    region text DEFAULT 'china'::text NOT NULL,
    service_channel_id text,
    marketing_channel_id text,
    CONSTRAINT app_xiaomi_pkey PRIMARY KEY (app_id),
    CONSTRAINT app_xiaomi_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_xiaomi_app_secret_file_check CHECK ((app_secret_file <> ''::text)),
    CONSTRAINT app_xiaomi_marketing_channel_id_check CHECK ((marketing_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'::text)),
    CONSTRAINT app_xiaomi_package_name_check CHECK ((package_name ~ '^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$'::text)),
    CONSTRAINT app_xiaomi_region_check CHECK ((region = ANY (ARRAY['china'::text, 'singapore'::text, 'europe'::text, 'russia'::text, 'india'::text]))),
    CONSTRAINT app_xiaomi_service_channel_id_check CHECK ((service_channel_id ~ '^[A-Za-z0-9_.-]{1,200}$'::text))
);
COMMENT ON TABLE herald.app_xiaomi IS 'An app''s Xiaomi Mi Push setup, one row per app that sends to Xiaomi phones.';
COMMENT ON COLUMN herald.app_xiaomi.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.app_xiaomi.app_secret_file IS 'A file holding the app''s AppSecret (Xiaomi''s push console), read by the daemon; the secret never enters the database.';
COMMENT ON COLUMN herald.app_xiaomi.package_name IS 'The app''s Android package name, as Mi Push''s restricted_package_name.';
COMMENT ON COLUMN herald.app_xiaomi.region IS 'Where the app''s phones are, which decides Mi Push''s host: china (the default), singapore (any other region), europe (the EEA and the UK), russia or india.';
COMMENT ON COLUMN herald.app_xiaomi.service_channel_id IS 'The channel (extra.channel_id) the app registered with Xiaomi as a private-message one, for its service notifications; NULL: Mi Push''s default class.';
COMMENT ON COLUMN herald.app_xiaomi.marketing_channel_id IS 'The channel the app registered with Xiaomi as a public-message one, for its marketing notifications; NULL: Mi Push''s default class.';
REVOKE ALL ON herald.app_xiaomi FROM herald_daemon;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.app_xiaomi TO herald_operator;
GRANT SELECT ON herald.app_xiaomi TO herald_daemon;


-- herald.broadcast_channels
-- -------------------------

CREATE TABLE herald.broadcast_channels (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    app_id text NOT NULL,
    name text NOT NULL,
    stores_latest boolean DEFAULT false NOT NULL,
    state text DEFAULT 'creating'::text NOT NULL,
    channel_id text,
    reason text,
    event_at timestamp with time zone,
    last_notification_id bigint,
    last_delivery_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT broadcast_channels_pkey PRIMARY KEY (id),
    CONSTRAINT broadcast_channels_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT broadcast_channels_check CHECK (((state <> ALL (ARRAY['active'::text, 'deleting'::text])) OR (channel_id IS NOT NULL))),
    CONSTRAINT broadcast_channels_name_check CHECK ((name <> ''::text)),
    CONSTRAINT broadcast_channels_state_check CHECK ((state = ANY (ARRAY['creating'::text, 'active'::text, 'deleting'::text, 'deleted'::text, 'failed'::text])))
);
CREATE UNIQUE INDEX broadcast_channels_name ON herald.broadcast_channels USING btree (app_id, name) WHERE (state = ANY (ARRAY['creating'::text, 'active'::text]));
COMMENT ON TABLE herald.broadcast_channels IS 'One row per APNs broadcast channel (iOS 18) of an app, created and deleted by the producer (herald.create_channel, herald.delete_channel) and made and deleted at APNs by the channels worker. A broadcast (herald.broadcast_activity) is one delivery to every Live Activity subscribed to the channel.';
COMMENT ON COLUMN herald.broadcast_channels.id IS 'Herald''s id for the channel, which the channels worker''s job (herald.jobs.ref) and herald.notifications.broadcast_channel_id name.';
COMMENT ON COLUMN herald.broadcast_channels.app_id IS 'The app it belongs to (herald.apps), whose APNs setup makes it and sends to it; deleted with the app.';
COMMENT ON COLUMN herald.broadcast_channels.name IS 'The app''s name for it (a match, a flight), as herald.create_channel and herald.broadcast_activity take it: one creating or active channel per name and app, free again once that one is deleting, deleted or failed.';
COMMENT ON COLUMN herald.broadcast_channels.stores_latest IS 'Its message storage policy at APNs, fixed when created: true, APNs keeps the most recent message for offline devices; false, it keeps none (and allows a larger publishing budget).';
COMMENT ON COLUMN herald.broadcast_channels.state IS 'creating (the channels worker is making it at APNs; broadcasts wait), active (channel_id set), deleting (herald.delete_channel; being deleted at APNs), deleted, or failed (APNs refused it, its job ran out of attempts, or APNs did not know it at a broadcast; reason says).';
COMMENT ON COLUMN herald.broadcast_channels.channel_id IS 'APNs'' id for the channel, which the app subscribes its Live Activities to (herald.channels returns it); NULL until the channels worker made it at APNs.';
COMMENT ON COLUMN herald.broadcast_channels.reason IS 'Why the channel is as it is: why its last request to APNs failed (while its job retries, or for good), ''deleted by the producer'', or that APNs no longer knew it. NULL once made active.';
COMMENT ON COLUMN herald.broadcast_channels.event_at IS 'The time of the newest broadcast ingested (its aps.timestamp): an older one is superseded, not sent. NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.last_notification_id IS 'The newest broadcast''s notification (herald.notifications.id); NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.last_delivery_id IS 'The newest broadcast''s delivery (herald.deliveries.id): an older one still waiting is cancelled as superseded, by ingest or when dispatch claims it. NULL before the first.';
COMMENT ON COLUMN herald.broadcast_channels.created_at IS 'When herald.create_channel made the row.';
COMMENT ON COLUMN herald.broadcast_channels.changed_at IS 'When its state or reason last changed: by herald.delete_channel, the channels worker, or dispatch failing a channel APNs did not know.';
GRANT SELECT ON herald.broadcast_channels TO herald_operator;


-- herald.config_scopes
-- --------------------

CREATE TABLE herald.config_scopes (
    scope text NOT NULL,
    waiting text NOT NULL,
    CONSTRAINT config_scopes_pkey PRIMARY KEY (scope)
);
COMMENT ON TABLE herald.config_scopes IS 'The configurations an app can get wrong, one row per scope; rows belong to the migrations.';
COMMENT ON COLUMN herald.config_scopes.scope IS 'The scope''s name, as herald.app_config_problems and herald.routes.scopes name it.';
COMMENT ON COLUMN herald.config_scopes.waiting IS 'What waits while it fails, as herald.app_problems says it.';
REVOKE ALL ON herald.config_scopes FROM herald_daemon;
GRANT SELECT ON herald.config_scopes TO herald_operator;
GRANT SELECT ON herald.config_scopes TO herald_daemon;


-- herald.app_config_problems
-- --------------------------

CREATE TABLE herald.app_config_problems (
    app_id text NOT NULL,
    scope text NOT NULL,
    problem text NOT NULL,
    since timestamp with time zone NOT NULL,
    failed_at timestamp with time zone NOT NULL,
    CONSTRAINT app_config_problems_pkey PRIMARY KEY (app_id, scope),
    CONSTRAINT app_config_problems_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT app_config_problems_scope_fkey FOREIGN KEY (scope) REFERENCES herald.config_scopes(scope)
);
COMMENT ON TABLE herald.app_config_problems IS 'An app''s configuration scope failing now, written by dispatch: routes needing it wait, but for a probe a minute.';
COMMENT ON COLUMN herald.app_config_problems.app_id IS 'The app whose configuration fails (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.app_config_problems.scope IS 'Which of its configurations fails (herald.config_scopes).';
COMMENT ON COLUMN herald.app_config_problems.problem IS 'What failed, in the daemon''s or the provider''s words.';
COMMENT ON COLUMN herald.app_config_problems.since IS 'When this problem was first seen; reset when the problem''s words change.';
COMMENT ON COLUMN herald.app_config_problems.failed_at IS 'When a send last confirmed it: the next probe goes out a minute after.';


-- herald.deliveries
-- -----------------

CREATE TABLE herald.deliveries (
    id bigint DEFAULT nextval('herald.deliveries_id_seq'::regclass) NOT NULL,
    notification_id bigint NOT NULL,
    device_id bigint,
    payload_kind text NOT NULL,
    state text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    provider_message_id text,
    last_error text,
    error_history text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    delivered_at timestamp with time zone,
    seen_at timestamp with time zone,
    finished_at timestamp with time zone,
    opened_at timestamp with time zone,
    run_at timestamp with time zone DEFAULT now(),
    locked_by text,
    dead_at timestamp with time zone,
    provider_unique_id text,
    kept boolean DEFAULT false NOT NULL,
    activity_token_id bigint,
    push_type_token_id bigint,
    stored_until timestamp with time zone,
    held_since timestamp with time zone,
    fetched_at timestamp with time zone,
    receipt text,
    receipt_reason text,
    receipt_at timestamp with time zone,
    CONSTRAINT "a queued delivery has a run_at" CHECK (((state <> 'queued'::text) OR (run_at IS NOT NULL))),
    CONSTRAINT "only a failed delivery is dead" CHECK (((dead_at IS NULL) OR (state = 'failed'::text)))
) PARTITION BY LIST (kept);
CREATE TABLE herald.deliveries_kept PARTITION OF herald.deliveries FOR VALUES IN (true) WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.deliveries_rotating PARTITION OF herald.deliveries FOR VALUES IN (false) PARTITION BY RANGE (id);
CREATE TABLE herald.deliveries_g0 PARTITION OF herald.deliveries_rotating FOR VALUES FROM (MINVALUE) TO ('4294967296') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
ALTER TABLE herald.deliveries_g0 ALTER COLUMN id SET DEFAULT NULL;
CREATE TABLE herald.deliveries_g1 PARTITION OF herald.deliveries_rotating FOR VALUES FROM ('4294967296') TO ('8589934592') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.deliveries_g2 PARTITION OF herald.deliveries_rotating FOR VALUES FROM ('8589934592') TO ('12884901888') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.deliveries_g3 PARTITION OF herald.deliveries_rotating FOR VALUES FROM ('12884901888') TO ('17179869184') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_payload_kind_check CHECK ((payload_kind = ANY ('{android_data,android_wakeup,ios_alert,ios_background,ios_wakeup,topic,web,live_activity,broadcast,harmony_alert,harmony_background,ios_widgets,ios_voip,ios_location,ios_pushtotalk}'::text[]))) NOT VALID;
ALTER TABLE herald.deliveries ADD CONSTRAINT deliveries_state_check CHECK ((state = ANY ('{queued,sent,validated,delivered,expired,cancelled,token_invalid,failed}'::text[]))) NOT VALID;
ALTER TABLE herald.deliveries_g3 ADD CONSTRAINT deliveries_g3_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_g3_dead_at_idx ON herald.deliveries_g3 USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_g3_device_id_idx ON herald.deliveries_g3 USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_g3_device_id_sent_at_idx ON herald.deliveries_g3 USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
CREATE INDEX deliveries_g3_device_id_sent_at_idx1 ON herald.deliveries_g3 USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_g3_notification_id_idx ON herald.deliveries_g3 USING btree (notification_id);
CREATE INDEX deliveries_g3_run_at_id_idx ON herald.deliveries_g3 USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_g3_run_at_idx ON herald.deliveries_g3 USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
ALTER TABLE herald.deliveries_g2 ADD CONSTRAINT deliveries_g2_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_g2_dead_at_idx ON herald.deliveries_g2 USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_g2_device_id_idx ON herald.deliveries_g2 USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_g2_device_id_sent_at_idx ON herald.deliveries_g2 USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
CREATE INDEX deliveries_g2_device_id_sent_at_idx1 ON herald.deliveries_g2 USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_g2_notification_id_idx ON herald.deliveries_g2 USING btree (notification_id);
CREATE INDEX deliveries_g2_run_at_id_idx ON herald.deliveries_g2 USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_g2_run_at_idx ON herald.deliveries_g2 USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
ALTER TABLE herald.deliveries_g1 ADD CONSTRAINT deliveries_g1_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_g1_dead_at_idx ON herald.deliveries_g1 USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_g1_device_id_idx ON herald.deliveries_g1 USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_g1_device_id_sent_at_idx ON herald.deliveries_g1 USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
CREATE INDEX deliveries_g1_device_id_sent_at_idx1 ON herald.deliveries_g1 USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_g1_notification_id_idx ON herald.deliveries_g1 USING btree (notification_id);
CREATE INDEX deliveries_g1_run_at_id_idx ON herald.deliveries_g1 USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_g1_run_at_idx ON herald.deliveries_g1 USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
ALTER TABLE herald.deliveries_g0 ADD CONSTRAINT deliveries_g0_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_g0_by_notification ON herald.deliveries_g0 USING btree (notification_id);
CREATE INDEX deliveries_g0_dead ON herald.deliveries_g0 USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_g0_device_id_idx ON herald.deliveries_g0 USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_g0_device_id_sent_at_idx ON herald.deliveries_g0 USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_g0_due ON herald.deliveries_g0 USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_g0_retrying ON herald.deliveries_g0 USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
CREATE INDEX deliveries_g0_unreported ON herald.deliveries_g0 USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
ALTER TABLE herald.deliveries_rotating ADD CONSTRAINT deliveries_rotating_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_rotating_dead_at_idx ON herald.deliveries_rotating USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_rotating_device_id_idx ON herald.deliveries_rotating USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_rotating_device_id_sent_at_idx ON herald.deliveries_rotating USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
CREATE INDEX deliveries_rotating_device_id_sent_at_idx1 ON herald.deliveries_rotating USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_rotating_notification_id_idx ON herald.deliveries_rotating USING btree (notification_id);
CREATE INDEX deliveries_rotating_run_at_id_idx ON herald.deliveries_rotating USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_rotating_run_at_idx ON herald.deliveries_rotating USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
ALTER TABLE herald.deliveries_kept ADD CONSTRAINT deliveries_kept_pkey PRIMARY KEY (id);
CREATE INDEX deliveries_kept_dead_at_idx ON herald.deliveries_kept USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_kept_device_id_idx ON herald.deliveries_kept USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_kept_device_id_sent_at_idx ON herald.deliveries_kept USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
CREATE INDEX deliveries_kept_device_id_sent_at_idx1 ON herald.deliveries_kept USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_kept_notification_id_idx ON herald.deliveries_kept USING btree (notification_id);
CREATE INDEX deliveries_kept_run_at_id_idx ON herald.deliveries_kept USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_kept_run_at_idx ON herald.deliveries_kept USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
CREATE INDEX deliveries_by_notification ON herald.deliveries USING btree (notification_id);
CREATE INDEX deliveries_dead ON herald.deliveries USING btree (dead_at) WHERE (dead_at IS NOT NULL);
CREATE INDEX deliveries_due ON herald.deliveries USING btree (run_at, id) WHERE (state = 'queued'::text);
CREATE INDEX deliveries_in_device_store ON herald.deliveries USING btree (device_id, sent_at) WHERE ((state = ANY (ARRAY['queued'::text, 'sent'::text])) AND ((stored_until IS NOT NULL) OR (held_since IS NOT NULL)));
CREATE INDEX deliveries_pending_wakeup ON herald.deliveries USING btree (device_id) WHERE ((payload_kind = 'ios_wakeup'::text) AND (state = 'queued'::text));
CREATE INDEX deliveries_retrying ON herald.deliveries USING btree (run_at) WHERE ((state = 'queued'::text) AND (locked_by IS NULL) AND (attempts > 0));
CREATE INDEX deliveries_unreported ON herald.deliveries USING btree (device_id, sent_at DESC) WHERE (state = 'sent'::text);
COMMENT ON TABLE herald.deliveries IS 'One row per notification and device (or token), or one for a topic or broadcast channel: the unit that is sent, with its attempts and outcome. The dispatch worker''s durable queue (rows queued, due at run_at), partitioned like herald.notifications.';
COMMENT ON COLUMN herald.deliveries.id IS 'Its id (herald.deliveries_id_seq); id >> 32 is its generation (herald.generations), whose partition holds it unless kept.';
COMMENT ON COLUMN herald.deliveries.notification_id IS 'The notification it sends (herald.notifications.id); not a foreign key, since both tables are partitioned.';
COMMENT ON COLUMN herald.deliveries.device_id IS 'The device it goes to (herald.devices.id). NULL: a send to no device (a topic or a broadcast channel).';
COMMENT ON COLUMN herald.deliveries.payload_kind IS 'What is sent, set from the platform or push type: android_data, android_wakeup, ios_alert, ios_background, ios_wakeup, topic, web, live_activity, broadcast, harmony_alert, harmony_background, ios_widgets, ios_voip, ios_location or ios_pushtotalk. With the token''s kind it picks the route (herald.route_rules).';
COMMENT ON COLUMN herald.deliveries.state IS 'queued (waiting, leased, backing off or held), sent (accepted by the provider), validated (a dry run), delivered (reported or fetched by the app), expired, cancelled (device or token gone, or superseded), token_invalid or failed (refused for good, or dead).';
COMMENT ON COLUMN herald.deliveries.attempts IS 'Claims so far (a lease at birth by ingest counts one); a postponement gives it back, herald.redrive resets it. It goes dead once its 25th attempt fails.';
COMMENT ON COLUMN herald.deliveries.provider_message_id IS 'The provider''s id for the sent message: FCM''s message name, the apns-id, a push service''s Location, Huawei''s request id. NULL: not sent.';
COMMENT ON COLUMN herald.deliveries.last_error IS 'The latest error, or why it ended or waits (dispatch, the retry worker, ingest; herald.redrive prefixes redriven after:). NULL: none.';
COMMENT ON COLUMN herald.deliveries.error_history IS 'Every error it met, oldest first, each prefixed with its time (YYYY-MM-DD HH24:MI:SS); empty when none.';
COMMENT ON COLUMN herald.deliveries.created_at IS 'When it was made: by ingest, by herald.reconcile for a wake-up, or for a Live Activity token registered late.';
COMMENT ON COLUMN herald.deliveries.sent_at IS 'When the provider''s answer accepting it came in (state sent or validated). NULL: not sent.';
COMMENT ON COLUMN herald.deliveries.delivered_at IS 'When the app first reported it (delivered, seen or opened; herald.reconcile) or fetched it (herald.missed_notifications). NULL: neither.';
COMMENT ON COLUMN herald.deliveries.seen_at IS 'When the app first reported it seen (or opened), set by herald.reconcile. NULL: not reported so.';
COMMENT ON COLUMN herald.deliveries.finished_at IS 'When it stopped being queued (answered, ended unsent, or dead). NULL while queued; herald.redrive clears it.';
COMMENT ON COLUMN herald.deliveries.opened_at IS 'When the app first reported it opened (the user tapped it), set by herald.reconcile. NULL: not reported so.';
COMMENT ON COLUMN herald.deliveries.run_at IS 'When a queued delivery is next due: send_at or its creation, a retry''s backoff, a postponement, its lease''s end while locked_by holds it, or its expiry while held. Unused once not queued.';
COMMENT ON COLUMN herald.deliveries.locked_by IS 'The worker holding its lease (HERALD_WORKER_ID, host:pid by default), from a claim or ingest''s lease at birth. NULL: none.';
COMMENT ON COLUMN herald.deliveries.dead_at IS 'When it ran out of attempts (state failed); listed in herald.dead_jobs until herald.redrive clears it. NULL: not dead.';
COMMENT ON COLUMN herald.deliveries.provider_unique_id IS 'APNs'' apns-unique-id, when it gives one (its development environment): the key to its delivery log in Apple''s Push Notifications Console. NULL otherwise.';
COMMENT ON COLUMN herald.deliveries.kept IS 'Partition key: false in its generation''s partition; true once herald.retire_generation moved it to deliveries_kept (still queued, or dead within the retention).';
COMMENT ON COLUMN herald.deliveries.activity_token_id IS 'A Live Activity delivery''s token (herald.activity_tokens.id), on device_id. NULL for other payload kinds.';
COMMENT ON COLUMN herald.deliveries.push_type_token_id IS 'For a widgets, VoIP, location or Push to Talk push: the device''s token of that type (herald.push_type_tokens.id), sent to instead of its own. NULL otherwise.';
COMMENT ON COLUMN herald.deliveries.stored_until IS 'For a delivery counted in its device''s store at the provider (herald.routes.device_store_capacity): until when the provider may keep it there, its expiry. It counts while queued, or sent and unreported since the device last reported (herald.stored_messages). NULL: not counted.';
COMMENT ON COLUMN herald.deliveries.held_since IS 'When it began waiting because its device''s store at the provider was full; while held, run_at is its expiry. A report from the device releases it (herald.reconcile), a fetch marks it delivered (herald.missed_notifications). NULL: not held.';
COMMENT ON COLUMN herald.deliveries.fetched_at IS 'When the app''s backend first fetched it for the app (herald.missed_notifications); once the app asks past it, it is delivered. A held delivery fetched is not released to be sent. NULL: not fetched.';
COMMENT ON COLUMN herald.deliveries.receipt IS 'What the provider''s receipt says (herald.record_receipts): delivered (it reached the device) or not_delivered (receipt_reason says why). A delivered receipt is final; a later not_delivered one replaces an earlier one. NULL: no receipt (the provider sends none, or the app did not set them up).';
COMMENT ON COLUMN herald.deliveries.receipt_reason IS 'The receipt''s meaning in words, with the provider''s code: Huawei Push Kit receipt 6: the notification was not shown … NULL: no receipt.';
COMMENT ON COLUMN herald.deliveries.receipt_at IS 'When the provider says it happened (Push Kit: when it reached the device, or when the receipt was made if it did not). NULL: no receipt.';
REVOKE ALL ON herald.deliveries_g0 FROM herald_daemon;


-- herald.delivery_reports
-- -----------------------

CREATE TABLE herald.delivery_reports (
    id bigint DEFAULT nextval('herald.delivery_reports_id_seq'::regclass) NOT NULL,
    reference text NOT NULL,
    report_kind text DEFAULT 'delivered'::text NOT NULL,
    reported_at timestamp with time zone DEFAULT now() NOT NULL,
    processed_at timestamp with time zone,
    outcome text,
    delivery_id bigint NOT NULL,
    device_id bigint NOT NULL,
    kept boolean DEFAULT false NOT NULL,
    CONSTRAINT delivery_reports_report_kind_check CHECK ((report_kind = ANY (ARRAY['delivered'::text, 'seen'::text, 'opened'::text])))
) PARTITION BY LIST (kept);
CREATE TABLE herald.delivery_reports_kept PARTITION OF herald.delivery_reports FOR VALUES IN (true);
CREATE TABLE herald.delivery_reports_rotating PARTITION OF herald.delivery_reports FOR VALUES IN (false) PARTITION BY RANGE (delivery_id);
CREATE TABLE herald.delivery_reports_g1 PARTITION OF herald.delivery_reports_rotating FOR VALUES FROM (MINVALUE) TO ('8589934592');
ALTER TABLE herald.delivery_reports_g1 ALTER COLUMN id SET DEFAULT NULL;
CREATE TABLE herald.delivery_reports_g2 PARTITION OF herald.delivery_reports_rotating FOR VALUES FROM ('8589934592') TO ('12884901888');
CREATE TABLE herald.delivery_reports_g3 PARTITION OF herald.delivery_reports_rotating FOR VALUES FROM ('12884901888') TO ('17179869184');
ALTER TABLE herald.delivery_reports_g3 ADD CONSTRAINT delivery_reports_g3_delivery_id_report_kind_kept_key UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports_g3 ADD CONSTRAINT delivery_reports_g3_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_g3_id_idx ON herald.delivery_reports_g3 USING btree (id) WHERE (processed_at IS NULL);
ALTER TABLE herald.delivery_reports_g2 ADD CONSTRAINT delivery_reports_g2_delivery_id_report_kind_kept_key UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports_g2 ADD CONSTRAINT delivery_reports_g2_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_g2_id_idx ON herald.delivery_reports_g2 USING btree (id) WHERE (processed_at IS NULL);
ALTER TABLE herald.delivery_reports_g1 ADD CONSTRAINT delivery_reports_g1_delivery_id_report_kind_kept_key UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports_g1 ADD CONSTRAINT delivery_reports_g1_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_g1_unprocessed ON herald.delivery_reports_g1 USING btree (id) WHERE (processed_at IS NULL);
ALTER TABLE herald.delivery_reports_rotating ADD CONSTRAINT delivery_reports_rotating_delivery_id_report_kind_kept_key UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports_rotating ADD CONSTRAINT delivery_reports_rotating_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_rotating_id_idx ON herald.delivery_reports_rotating USING btree (id) WHERE (processed_at IS NULL);
ALTER TABLE herald.delivery_reports_kept ADD CONSTRAINT delivery_reports_kept_delivery_id_report_kind_kept_key UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports_kept ADD CONSTRAINT delivery_reports_kept_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_kept_id_idx ON herald.delivery_reports_kept USING btree (id) WHERE (processed_at IS NULL);
CREATE INDEX delivery_reports_kept_processed ON herald.delivery_reports_kept USING btree (processed_at) WHERE (processed_at IS NOT NULL);
ALTER TABLE herald.delivery_reports ADD CONSTRAINT delivery_reports_once UNIQUE (delivery_id, report_kind, kept);
ALTER TABLE herald.delivery_reports ADD CONSTRAINT delivery_reports_pkey PRIMARY KEY (id, delivery_id, kept);
CREATE INDEX delivery_reports_unprocessed ON herald.delivery_reports USING btree (id) WHERE (processed_at IS NULL);
COMMENT ON TABLE herald.delivery_reports IS 'One row per report an app sent back for a delivery (delivered, seen or opened), recorded by herald.report_delivery and applied in batches by the reconcile worker through a reconcile job each. Partitioned by kept and then with its delivery''s generation.';
COMMENT ON COLUMN herald.delivery_reports.id IS 'Its id (herald.delivery_reports_id_seq); its reconcile job names it (herald.jobs.ref).';
COMMENT ON COLUMN herald.delivery_reports.reference IS 'The opaque reference (herald_report) the app sent back: the delivery and device ids with an HMAC tag.';
COMMENT ON COLUMN herald.delivery_reports.report_kind IS 'delivered (it arrived), seen (it was shown) or opened (the user tapped it); one report per delivery and kind.';
COMMENT ON COLUMN herald.delivery_reports.reported_at IS 'When the report was recorded; herald.reconcile copies it to the delivery''s delivered_at, seen_at or opened_at.';
COMMENT ON COLUMN herald.delivery_reports.processed_at IS 'When the reconcile worker applied it (herald.reconcile). NULL: not applied yet.';
COMMENT ON COLUMN herald.delivery_reports.outcome IS 'What applying it did: applied, the only value herald.reconcile writes. NULL: not applied yet.';
COMMENT ON COLUMN herald.delivery_reports.delivery_id IS 'The delivery reported (herald.deliveries.id), from the reference; not a foreign key. Unless kept, the report sits in that delivery''s generation.';
COMMENT ON COLUMN herald.delivery_reports.device_id IS 'The device the reference was issued to (herald.devices.id): the delivery''s device.';
COMMENT ON COLUMN herald.delivery_reports.kept IS 'Partition key: false in its delivery''s generation; true in delivery_reports_kept (beside a kept delivery, or moved there unapplied when its generation retired).';
REVOKE ALL ON herald.delivery_reports_g1 FROM herald_daemon;


-- herald.device_changes
-- ---------------------

CREATE TABLE herald.device_changes (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    app_id text NOT NULL,
    device_id text NOT NULL,
    change text NOT NULL,
    reason text,
    token_hint text,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT device_changes_pkey PRIMARY KEY (id)
);
ALTER TABLE herald.device_changes ADD CONSTRAINT device_changes_change_check CHECK ((change = ANY (ARRAY['token_invalid'::text, 'token_moved'::text, 'logged_out'::text, 'disabled'::text, 'enabled'::text, 'notifications_off'::text, 'notifications_on'::text]))) NOT VALID;
CREATE INDEX device_changes_changed ON herald.device_changes USING btree (changed_at);
CREATE INDEX device_changes_feed ON herald.device_changes USING btree (app_id, xid, id);
COMMENT ON TABLE herald.device_changes IS 'One row per change of a device''s state that its backend may act on, written by a trigger on herald.devices: a producer reads its apps'' with herald.changed_devices. Pruned by herald.prune_records after the retention.';
COMMENT ON COLUMN herald.device_changes.id IS 'The change''s id, in the order changes were made; with xid, the feed''s cursor.';
COMMENT ON COLUMN herald.device_changes.app_id IS 'The device''s app (herald.apps).';
COMMENT ON COLUMN herald.device_changes.device_id IS 'The producer''s id for the device (herald.devices.device_id).';
COMMENT ON COLUMN herald.device_changes.change IS 'token_invalid (a provider declared its token dead), token_moved (another device of the app registered its token), logged_out (herald.unregister_device), disabled (by an operator), enabled (registered again, or herald.enable_device), notifications_off (a provider''s receipt says the device''s notifications are turned off; it stays enabled) or notifications_on (a later receipt says one reached it).';
COMMENT ON COLUMN herald.device_changes.reason IS 'Why, in words: the provider''s error, the logout''s reason, the device the token moved to. NULL for enabled.';
COMMENT ON COLUMN herald.device_changes.token_hint IS 'The token it had, as logs show one (herald.token_hint), never the token.';
COMMENT ON COLUMN herald.device_changes.changed_at IS 'When the change was made.';
COMMENT ON COLUMN herald.device_changes.xid IS 'The transaction that made it: herald.changed_devices returns changes in the order of their transactions, each once every older transaction has ended, so no cursor passes a change that commits late.';
GRANT SELECT ON herald.device_changes TO herald_operator;


-- herald.fcm_delivery_days
-- ------------------------

CREATE TABLE herald.fcm_delivery_days (
    app_id text NOT NULL,
    day date NOT NULL,
    analytics_label text NOT NULL,
    accepted bigint,
    delivered real,
    pending real,
    collapsed real,
    dropped_too_many_pending real,
    dropped_app_force_stopped real,
    dropped_device_inactive real,
    dropped_ttl_expired real,
    data jsonb NOT NULL,
    herald_sent bigint,
    herald_held bigint,
    read_at timestamp with time zone NOT NULL,
    CONSTRAINT fcm_delivery_days_pkey PRIMARY KEY (app_id, day, analytics_label),
    CONSTRAINT fcm_delivery_days_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE
);
COMMENT ON TABLE herald.fcm_delivery_days IS 'The FCM Data API''s delivery data of each Android app (herald.app_fcm.android_app_id), a row per day (Google''s, America/Los_Angeles) and analytics label, read once a day, beside Herald''s count of what it sent through FCM to the app''s Android devices that day. Kept for the retention.';
COMMENT ON COLUMN herald.fcm_delivery_days.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.fcm_delivery_days.day IS 'The day, as Google counts it (America/Los_Angeles).';
COMMENT ON COLUMN herald.fcm_delivery_days.analytics_label IS 'The messages'' analytics label; empty for those sent without one (Herald''s, unless a producer set one).';
COMMENT ON COLUMN herald.fcm_delivery_days.accepted IS 'Messages FCM accepted for the app that day, counting only devices that share usage and diagnostics with Google (countMessagesAccepted); the shares below are of these.';
COMMENT ON COLUMN herald.fcm_delivery_days.delivered IS 'Percent delivered to the device.';
COMMENT ON COLUMN herald.fcm_delivery_days.pending IS 'Percent neither delivered nor dropped by the day''s end: the device was offline (some arrive later).';
COMMENT ON COLUMN herald.fcm_delivery_days.collapsed IS 'Percent replaced by a later message with the same collapse key.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_too_many_pending IS 'Percent dropped because over 100 messages waited for the offline device (Herald''s catch-up exists for these).';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_app_force_stopped IS 'Percent dropped because the app was force-stopped.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_device_inactive IS 'Percent dropped because FCM holds the device inactive.';
COMMENT ON COLUMN herald.fcm_delivery_days.dropped_ttl_expired IS 'Percent that expired before the device came online.';
COMMENT ON COLUMN herald.fcm_delivery_days.data IS 'Google''s whole data object for the day (delivery performance, priority lowered, proxy notifications, and whatever it adds).';
COMMENT ON COLUMN herald.fcm_delivery_days.herald_sent IS 'Deliveries Herald sent through FCM to the app''s Android devices that day (Google''s day), every label together; on the row of the empty label only.';
COMMENT ON COLUMN herald.fcm_delivery_days.herald_held IS 'Deliveries Herald held back that day because the device''s store at FCM was full (herald.deliveries.held_since); on the row of the empty label only.';
COMMENT ON COLUMN herald.fcm_delivery_days.read_at IS 'When it was last read from Google.';
GRANT SELECT ON herald.fcm_delivery_days TO herald_operator;


-- herald.fcm_delivery_reads
-- -------------------------

CREATE TABLE herald.fcm_delivery_reads (
    app_id text NOT NULL,
    next_read_at timestamp with time zone NOT NULL,
    read_at timestamp with time zone,
    problem text,
    CONSTRAINT fcm_delivery_reads_pkey PRIMARY KEY (app_id),
    CONSTRAINT fcm_delivery_reads_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE
);
COMMENT ON TABLE herald.fcm_delivery_reads IS 'When each app''s FCM delivery data is read next (a daemon claims it by moving next_read_at on), when it was last read, and the problem the last read met.';
COMMENT ON COLUMN herald.fcm_delivery_reads.app_id IS 'The app (herald.apps).';
COMMENT ON COLUMN herald.fcm_delivery_reads.next_read_at IS 'When a daemon reads it next: after a read, the next day''s; while a daemon reads it, that read''s end at the latest.';
COMMENT ON COLUMN herald.fcm_delivery_reads.read_at IS 'When it was last read. NULL: never.';
COMMENT ON COLUMN herald.fcm_delivery_reads.problem IS 'Why the last read failed (Google''s answer, the credentials), in words; NULL when it worked.';
REVOKE ALL ON herald.fcm_delivery_reads FROM herald_daemon;
GRANT INSERT, SELECT, UPDATE ON herald.fcm_delivery_reads TO herald_daemon;
GRANT SELECT ON herald.fcm_delivery_reads TO herald_operator;


-- herald.fcm_quotas
-- -----------------

CREATE TABLE herald.fcm_quotas (
    project_id text NOT NULL,
    per_second integer,
    window_start timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    drawn integer DEFAULT 0 NOT NULL,
    paused_until timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    paused_reason text,
    CONSTRAINT fcm_quotas_pkey PRIMARY KEY (project_id),
    CONSTRAINT fcm_quotas_per_second_check CHECK ((per_second > 0))
);
COMMENT ON TABLE herald.fcm_quotas IS 'Each FCM project''s sends, drawn a second at a time by every daemon on the database; paused after a 429';
COMMENT ON COLUMN herald.fcm_quotas.project_id IS 'The FCM project (herald.app_fcm.project_id); its row is made by its first draw or by an operator.';
COMMENT ON COLUMN herald.fcm_quotas.per_second IS 'Sends a second for the whole fleet, set by an operator; NULL: the daemons'' HERALD_FCM_RATE_LIMIT.';
COMMENT ON COLUMN herald.fcm_quotas.window_start IS 'The second (of the server''s clock) being drawn from; -infinity before the first draw.';
COMMENT ON COLUMN herald.fcm_quotas.drawn IS 'Sends the daemons drew from that second; what they do not spend within it is lost.';
COMMENT ON COLUMN herald.fcm_quotas.paused_until IS 'After a 429, nothing is drawn until then (FCM''s Retry-After); set by daemons, ends by itself.';
COMMENT ON COLUMN herald.fcm_quotas.paused_reason IS 'FCM''s words for the latest pause; NULL: never paused.';
GRANT SELECT ON herald.fcm_quotas TO herald_operator;
GRANT INSERT (project_id, per_second), UPDATE (per_second) ON herald.fcm_quotas TO herald_operator;


-- herald.generations
-- ------------------

CREATE TABLE herald.generations (
    generation integer NOT NULL,
    first_id bigint NOT NULL,
    end_id bigint NOT NULL,
    opened_at timestamp with time zone,
    closed_at timestamp with time zone,
    CONSTRAINT generations_pkey PRIMARY KEY (generation),
    CONSTRAINT generations_check CHECK ((end_id > first_id))
);
COMMENT ON TABLE herald.generations IS 'The id ranges herald.notifications and herald.deliveries are partitioned by (herald.delivery_reports by delivery_id): one a HERALD_PARTITION_INTERVAL, dropped a retention after it closed. Made ahead, opened and retired by the pruner (herald.open_generation, retire_generation, drop_generation).';
COMMENT ON COLUMN herald.generations.generation IS 'The generation''s number N: its ids start at N << 32, and its partitions are <table>_gN.';
COMMENT ON COLUMN herald.generations.first_id IS 'Its first id, N << 32 (the lowest bigint for the generation holding a migrated database''s old rows).';
COMMENT ON COLUMN herald.generations.end_id IS 'The first id past it, (N + 1) << 32: its range excludes end_id.';
COMMENT ON COLUMN herald.generations.opened_at IS 'When the id sequences moved into it (herald.open_generation). NULL: made ahead, not in use yet; -infinity for a migrated database''s old rows.';
COMMENT ON COLUMN herald.generations.closed_at IS 'When the id sequences moved on; NULL while open or ahead. The generation is retired once this is older than HERALD_RETENTION.';
GRANT SELECT ON herald.generations TO herald_operator;


-- herald.idempotency_keys
-- -----------------------

CREATE TABLE herald.idempotency_keys (
    app_id text NOT NULL,
    idempotency_key text NOT NULL,
    notification_id bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (app_id, idempotency_key)
);
CREATE INDEX idempotency_keys_created ON herald.idempotency_keys USING btree (created_at);
COMMENT ON TABLE herald.idempotency_keys IS 'Each app''s idempotency keys and the notification each first named, kept for the retention. It keeps a key unique across every partition of herald.notifications: the insert trigger claims it (herald.claim_idempotency_key) before the row is written, and a used key skips the row.';
COMMENT ON COLUMN herald.idempotency_keys.app_id IS 'The app the key belongs to (herald.notifications.app_id): keys are unique per app.';
COMMENT ON COLUMN herald.idempotency_keys.idempotency_key IS 'The key as the producer gave it, or Herald''s own herald-wakeup-<id> for a wake-up.';
COMMENT ON COLUMN herald.idempotency_keys.notification_id IS 'The notification that first used the key: what a repeated send returns instead of writing a row.';
COMMENT ON COLUMN herald.idempotency_keys.created_at IS 'That notification''s created_at; herald.prune_records deletes the key once past the retention and its notification is gone.';


-- herald.jobs
-- -----------

CREATE TABLE herald.jobs (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    kind text NOT NULL,
    ref bigint,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text DEFAULT 'ready'::text NOT NULL,
    run_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 25 NOT NULL,
    locked_by text,
    locked_until timestamp with time zone,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    dead_at timestamp with time zone,
    CONSTRAINT jobs_pkey PRIMARY KEY (id),
    CONSTRAINT jobs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT jobs_check CHECK (((state = 'running'::text) = (locked_until IS NOT NULL))),
    CONSTRAINT jobs_check1 CHECK (((state = 'dead'::text) = (dead_at IS NOT NULL))),
    CONSTRAINT jobs_kind_check CHECK ((kind <> ''::text)),
    CONSTRAINT jobs_max_attempts_check CHECK ((max_attempts > 0)),
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['ready'::text, 'running'::text, 'dead'::text])))
);
CREATE INDEX jobs_claim ON herald.jobs USING btree (kind, run_at, id) WHERE (state = 'ready'::text);
CREATE INDEX jobs_dead ON herald.jobs USING btree (kind, dead_at) WHERE (state = 'dead'::text);
CREATE INDEX jobs_leases ON herald.jobs USING btree (locked_until) WHERE (state = 'running'::text);
COMMENT ON TABLE herald.jobs IS 'The durable job queue for work other than ingest and dispatch: one row per job, claimed in batches with a lease by the workers of its kind. Ready, then running, deleted when done; ready again after a retry or lease rescue; dead after its last attempt, until herald.redrive.';
COMMENT ON COLUMN herald.jobs.id IS 'The job''s id.';
COMMENT ON COLUMN herald.jobs.kind IS 'The worker that takes it: reconcile (one per delivery report), channels (a broadcast channel to make or delete at APNs), sleep (diagnostic), or a kind a deployment adds.';
COMMENT ON COLUMN herald.jobs.ref IS 'The row it is about: herald.delivery_reports.id for reconcile, herald.broadcast_channels.id for channels. NULL: none (reconcile and channels make such a job dead).';
COMMENT ON COLUMN herald.jobs.payload IS 'The job''s arguments as a JSON object, for kinds that take some (sleep reads ms); reconcile and channels leave it {}.';
COMMENT ON COLUMN herald.jobs.state IS 'ready (due at run_at), running (leased to locked_by until locked_until) or dead (out of attempts or given up, until herald.redrive).';
COMMENT ON COLUMN herald.jobs.run_at IS 'When a ready job is due: its insert, a time the inserter chose, a retry''s backoff or a postponement; lease rescue and herald.redrive set it to now.';
COMMENT ON COLUMN herald.jobs.attempts IS 'Claims so far, a running one included; a postponement or a release at shutdown gives one back, herald.redrive resets it.';
COMMENT ON COLUMN herald.jobs.max_attempts IS 'Attempts before a failing job goes dead: 25 unless its inserter sets another.';
COMMENT ON COLUMN herald.jobs.locked_by IS 'The worker holding the lease (HERALD_WORKER_ID, host:pid by default). NULL unless running.';
COMMENT ON COLUMN herald.jobs.locked_until IS 'When the lease ends, set only while running; past it the retry worker returns the job to ready (dead when out of attempts).';
COMMENT ON COLUMN herald.jobs.last_error IS 'Why the last attempt failed, was postponed or lost its lease (prefixed redriven after: by herald.redrive). NULL: never failed.';
COMMENT ON COLUMN herald.jobs.created_at IS 'When the job was inserted.';
COMMENT ON COLUMN herald.jobs.dead_at IS 'When it went dead; set only while state is dead, cleared by herald.redrive.';


-- herald.live_activities
-- ----------------------

CREATE TABLE herald.live_activities (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    app_id text NOT NULL,
    activity_id text NOT NULL,
    attributes_type text NOT NULL,
    user_ref text,
    started_by text NOT NULL,
    state text DEFAULT 'active'::text NOT NULL,
    content_state jsonb,
    event_at timestamp with time zone,
    last_notification_id bigint,
    stale_at timestamp with time zone,
    dismiss_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    CONSTRAINT live_activities_pkey PRIMARY KEY (id),
    CONSTRAINT live_activities_app_id_activity_id_key UNIQUE (app_id, activity_id),
    CONSTRAINT live_activities_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT live_activities_activity_id_check CHECK ((activity_id <> ''::text)),
    CONSTRAINT live_activities_check CHECK (((state = 'ended'::text) = (ended_at IS NOT NULL))),
    CONSTRAINT live_activities_started_by_check CHECK ((started_by = ANY (ARRAY['producer'::text, 'app'::text]))),
    CONSTRAINT live_activities_state_check CHECK ((state = ANY (ARRAY['active'::text, 'ended'::text])))
);
COMMENT ON TABLE herald.live_activities IS 'One row per Live Activity of an app, with its state and newest content: made by ingest for a herald.start_activity, or by herald.register_activity_token for one the app started itself. Its events are notifications (herald.activity_events), its tokens rows of herald.activity_tokens.';
COMMENT ON COLUMN herald.live_activities.id IS 'Herald''s id for the activity, which herald.activity_tokens and herald.activity_events name as live_activity_id.';
COMMENT ON COLUMN herald.live_activities.app_id IS 'The app it belongs to (herald.apps); deleted with the app.';
COMMENT ON COLUMN herald.live_activities.activity_id IS 'The app''s name for it (an order id, a match id), used once per app: a second start with it is rejected. Events name the activity by it, and the app finds it in the attributes as herald_activity.';
COMMENT ON COLUMN herald.live_activities.attributes_type IS 'The app''s ActivityAttributes type, as ActivityKit names it (attributes-type): a start goes to push-to-start tokens of this type, and an update token registered for the activity must name it too.';
COMMENT ON COLUMN herald.live_activities.user_ref IS 'The user it was started for (the start''s user_ref; NULL when started on devices named), or, when the app started it, the user_ref of the device that registered its update token.';
COMMENT ON COLUMN herald.live_activities.started_by IS 'producer: herald.start_activity started it on the user''s devices; app: the app started it on the device itself and registered its update token.';
COMMENT ON COLUMN herald.live_activities.state IS 'active, or ended once its end event was ingested: after that a newer event is rejected and an older one superseded.';
COMMENT ON COLUMN herald.live_activities.content_state IS 'The ContentState of the newest event ingested, as JSON the app decodes: what the devices show. An end given none carries this one; NULL for an activity the app started, until its first event.';
COMMENT ON COLUMN herald.live_activities.event_at IS 'The time of the newest event ingested (its aps.timestamp): an older event is superseded, not sent. NULL for an activity the app started, until its first event.';
COMMENT ON COLUMN herald.live_activities.last_notification_id IS 'The notification of the newest event ingested (herald.notifications.id): an update token registered later is sent that update or end at once, while unexpired, to catch up. NULL until the first event.';
COMMENT ON COLUMN herald.live_activities.stale_at IS 'When the devices show the activity as stale, as the newest event that gave one set it; NULL when none did.';
COMMENT ON COLUMN herald.live_activities.dismiss_at IS 'When the ended activity leaves the Lock Screen, as its end gave it (a past time: at once); NULL when the newest event gave none.';
COMMENT ON COLUMN herald.live_activities.created_at IS 'When Herald made the row: at the ingest of its start, or when the app registered the first update token of one it started.';
COMMENT ON COLUMN herald.live_activities.ended_at IS 'When its end was ingested; NULL while active. Retention deletes an ended activity after the retention period, and one never ended once no device can still show it, with its update tokens and events.';
GRANT SELECT ON herald.live_activities TO herald_operator;


-- herald.activity_events
-- ----------------------

CREATE TABLE herald.activity_events (
    live_activity_id bigint NOT NULL,
    notification_id bigint NOT NULL,
    CONSTRAINT activity_events_pkey PRIMARY KEY (live_activity_id, notification_id),
    CONSTRAINT activity_events_live_activity_id_fkey FOREIGN KEY (live_activity_id) REFERENCES herald.live_activities(id) ON DELETE CASCADE
);
COMMENT ON TABLE herald.activity_events IS 'Which notifications are each Live Activity''s events (start, update, end): one row per activity and notification, written by ingest, so that herald.live_activity_sends lists an activity''s life without an index on herald.notifications.activity_id.';
COMMENT ON COLUMN herald.activity_events.live_activity_id IS 'The activity (herald.live_activities.id); its rows are deleted with it.';
COMMENT ON COLUMN herald.activity_events.notification_id IS 'The notification of one of its events (herald.notifications.id), recorded at ingest whatever its verdict (accepted, no_devices, superseded, expired, rejected).';
GRANT SELECT ON herald.activity_events TO herald_operator;


-- herald.notifications
-- --------------------

CREATE TABLE herald.notifications (
    id bigint GENERATED BY DEFAULT AS IDENTITY (START WITH 4294967296) NOT NULL,
    app_id text NOT NULL,
    idempotency_key text,
    user_ref text,
    device_ids text[],
    topic text,
    title text,
    body text,
    data jsonb,
    image_url text,
    sound text,
    badge integer,
    android_channel_id text,
    ios_category text,
    ios_thread_id text,
    deep_link text,
    priority text,
    ttl interval,
    expires_at timestamp with time zone,
    collapse_key text,
    send_at timestamp with time zone,
    silent boolean DEFAULT false NOT NULL,
    dry_run boolean DEFAULT false NOT NULL,
    state text DEFAULT 'received'::text NOT NULL,
    reason text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    ingested_at timestamp with time zone,
    origin text DEFAULT 'producer'::text NOT NULL,
    kept boolean DEFAULT false NOT NULL,
    ios_interruption_level text,
    ios_relevance_score double precision,
    ios_filter_criteria text,
    ios_target_content_id text,
    android_direct_boot_ok boolean,
    android_proxy text,
    activity_id text,
    activity_event text,
    activity_attributes_type text,
    activity_attributes jsonb,
    activity_content_state jsonb,
    activity_stale_at timestamp with time zone,
    activity_dismiss_at timestamp with time zone,
    activity_event_at timestamp with time zone,
    activity_channel text,
    broadcast_channel_id bigint,
    push_type text,
    message_class text,
    CONSTRAINT "badge must not be negative" CHECK ((badge >= 0)),
    CONSTRAINT "give ttl or expires_at, not both" CHECK (((ttl IS NULL) OR (expires_at IS NULL))),
    CONSTRAINT "ttl must be between 0 and 28 days" CHECK (((ttl >= '00:00:00'::interval) AND (ttl <= '28 days'::interval)))
) PARTITION BY LIST (kept);
ALTER TABLE herald.notifications ENABLE ROW LEVEL SECURITY;
CREATE TABLE herald.notifications_kept PARTITION OF herald.notifications FOR VALUES IN (true) WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.notifications_rotating PARTITION OF herald.notifications FOR VALUES IN (false) PARTITION BY RANGE (id);
CREATE TABLE herald.notifications_g0 PARTITION OF herald.notifications_rotating FOR VALUES FROM (MINVALUE) TO ('4294967296') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.notifications_g1 PARTITION OF herald.notifications_rotating FOR VALUES FROM ('4294967296') TO ('8589934592') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.notifications_g2 PARTITION OF herald.notifications_rotating FOR VALUES FROM ('8589934592') TO ('12884901888') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
CREATE TABLE herald.notifications_g3 PARTITION OF herald.notifications_rotating FOR VALUES FROM ('12884901888') TO ('17179869184') WITH (autovacuum_vacuum_scale_factor=0.01, vacuum_index_cleanup=on);
ALTER TABLE herald.notifications ADD CONSTRAINT "exactly one target: user_ref, device_ids or topic" CHECK ((num_nonnulls(user_ref, device_ids, topic) =
CASE
    WHEN (activity_event = ANY ('{update,end}'::text[])) THEN 0
    ELSE 1
END)) NOT VALID;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_origin_check CHECK ((origin = ANY ('{producer,wakeup}'::text[]))) NOT VALID;
ALTER TABLE herald.notifications ADD CONSTRAINT notifications_state_check CHECK ((state = ANY ('{received,accepted,rejected,expired,no_devices,superseded}'::text[]))) NOT VALID;
ALTER TABLE herald.notifications ADD CONSTRAINT "priority must be 'high' or 'normal'" CHECK ((priority = ANY ('{high,normal}'::text[]))) NOT VALID;
ALTER TABLE herald.notifications_g3 ADD CONSTRAINT notifications_g3_pkey PRIMARY KEY (id);
CREATE INDEX notifications_g3_app_id_idempotency_key_idx ON herald.notifications_g3 USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_g3_id_idx ON herald.notifications_g3 USING btree (id) WHERE (state = 'received'::text);
ALTER TABLE herald.notifications_g2 ADD CONSTRAINT notifications_g2_pkey PRIMARY KEY (id);
CREATE INDEX notifications_g2_app_id_idempotency_key_idx ON herald.notifications_g2 USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_g2_id_idx ON herald.notifications_g2 USING btree (id) WHERE (state = 'received'::text);
ALTER TABLE herald.notifications_g1 ADD CONSTRAINT notifications_g1_pkey PRIMARY KEY (id);
CREATE INDEX notifications_g1_app_id_idempotency_key_idx ON herald.notifications_g1 USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_g1_id_idx ON herald.notifications_g1 USING btree (id) WHERE (state = 'received'::text);
ALTER TABLE herald.notifications_g0 ADD CONSTRAINT notifications_g0_pkey PRIMARY KEY (id);
CREATE INDEX notifications_g0_app_id_idempotency_key_idx ON herald.notifications_g0 USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_g0_received ON herald.notifications_g0 USING btree (id) WHERE (state = 'received'::text);
ALTER TABLE herald.notifications_rotating ADD CONSTRAINT notifications_rotating_pkey PRIMARY KEY (id);
CREATE INDEX notifications_rotating_app_id_idempotency_key_idx ON herald.notifications_rotating USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_rotating_id_idx ON herald.notifications_rotating USING btree (id) WHERE (state = 'received'::text);
ALTER TABLE herald.notifications_kept ADD CONSTRAINT notifications_kept_pkey PRIMARY KEY (id);
CREATE INDEX notifications_kept_app_id_idempotency_key_idx ON herald.notifications_kept USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_kept_id_idx ON herald.notifications_kept USING btree (id) WHERE (state = 'received'::text);
CREATE INDEX notifications_by_key ON herald.notifications USING btree (app_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);
CREATE INDEX notifications_received ON herald.notifications USING btree (id) WHERE (state = 'received'::text);
COMMENT ON TABLE herald.notifications IS 'One row per notification a producer sent (herald.send, herald.send_push, a Live Activity call or a plain INSERT) or Herald made (a wake-up), kept with what became of it. The ingest worker''s durable queue (rows still received), partitioned by kept and then by generation of ids (herald.generations).';
COMMENT ON COLUMN herald.notifications.id IS 'Herald''s id for it, drawn at INSERT; id >> 32 is its generation (herald.generations), whose partition holds it unless kept.';
COMMENT ON COLUMN herald.notifications.app_id IS 'The app it is for (herald.apps.app_id); not a foreign key on purpose: ingest rejects an unknown app with a reason.';
COMMENT ON COLUMN herald.notifications.idempotency_key IS 'The producer''s key, unique per app (herald.idempotency_keys): a repeat writes nothing and gets the first id. NULL: none; keys starting herald- are Herald''s (wake-ups).';
COMMENT ON COLUMN herald.notifications.user_ref IS 'Target: every enabled device of this user (herald.devices.user_ref). Exactly one of user_ref, device_ids and topic is set; none for a Live Activity update or end.';
COMMENT ON COLUMN herald.notifications.device_ids IS 'Target: the app''s own device ids (herald.devices.device_id); each one registered and enabled gets a delivery. NULL unless this is the target.';
COMMENT ON COLUMN herald.notifications.topic IS 'Target: an FCM topic name, sent as one delivery of payload kind topic. NULL unless this is the target.';
COMMENT ON COLUMN herald.notifications.title IS 'The title shown (a Live Activity event''s alert title; a start needs one). NULL: none.';
COMMENT ON COLUMN herald.notifications.body IS 'The text shown under the title (a Live Activity event''s alert body). NULL: none.';
COMMENT ON COLUMN herald.notifications.data IS 'The producer''s data: a JSON object of strings, sent beside Herald''s keys; ingest turns numbers and booleans into strings. NULL: none.';
COMMENT ON COLUMN herald.notifications.image_url IS 'An https URL of an image to show with it (key image_url; a topic send''s notification image). NULL: none.';
COMMENT ON COLUMN herald.notifications.sound IS 'The sound to play, as the platform names it (aps.sound on iOS, key sound on Android). NULL: none given.';
COMMENT ON COLUMN herald.notifications.badge IS 'The number to show on the app''s icon (iOS aps.badge; HarmonyOS and Safari too). NULL: none sent.';
COMMENT ON COLUMN herald.notifications.android_channel_id IS 'The Android notification channel the app shows it in (key channel_id). NULL: none given.';
COMMENT ON COLUMN herald.notifications.ios_category IS 'iOS aps.category: the notification category whose actions the app registered. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_thread_id IS 'iOS aps.thread-id: notifications with the same one are grouped together. NULL: none.';
COMMENT ON COLUMN herald.notifications.deep_link IS 'A link the app opens when the notification is tapped (key deep_link; HarmonyOS and Safari open it themselves). NULL: none.';
COMMENT ON COLUMN herald.notifications.priority IS 'high or normal (APNs priority 10 or 5, FCM priority, Web Push Urgency); NULL at INSERT: ingest writes the app''s default_priority.';
COMMENT ON COLUMN herald.notifications.ttl IS 'How long it is worth delivering (0 to 28 days, from send_at or creation), as the producer gave it; ingest turns it into expires_at and sets it NULL.';
COMMENT ON COLUMN herald.notifications.expires_at IS 'When it stops being worth delivering: the producer''s, or set by ingest from ttl or the app''s default_ttl. Deliveries not sent by then end expired.';
COMMENT ON COLUMN herald.notifications.collapse_key IS 'Later notifications with the same key replace earlier ones (FCM collapse_key, apns-collapse-id, Web Push Topic). NULL: none.';
COMMENT ON COLUMN herald.notifications.send_at IS 'When to send it, up to a year ahead: its deliveries are due then (their run_at). NULL: at once.';
COMMENT ON COLUMN herald.notifications.silent IS 'A data-only push that shows nothing (an iOS background push; herald_silent on Android). Herald''s wake-ups are silent.';
COMMENT ON COLUMN herald.notifications.dry_run IS 'Checked, never delivered: FCM and Huawei validate it (validate_only), Herald checks it for the others; its deliveries end validated.';
COMMENT ON COLUMN herald.notifications.state IS 'What became of it, written by Herald: received (waiting for ingest), accepted (deliveries made), rejected, expired, no_devices, or superseded (a Live Activity event older than one already taken).';
COMMENT ON COLUMN herald.notifications.reason IS 'Why it was rejected, expired, found no devices or was superseded, in words for the producer (a wake-up: what it is for). NULL otherwise.';
COMMENT ON COLUMN herald.notifications.created_at IS 'When it was inserted (the inserting transaction''s time); Herald''s column, not the producer''s to write.';
COMMENT ON COLUMN herald.notifications.ingested_at IS 'When ingest gave its verdict (state); NULL while received. A wake-up has it from the start.';
COMMENT ON COLUMN herald.notifications.origin IS 'Who made it: producer, or wakeup (a silent push that makes an app fetch what it missed: herald.reconcile''s to an iOS device, or an Android device''s catch-up message when its store at FCM is full).';
COMMENT ON COLUMN herald.notifications.kept IS 'Partition key: false in its generation''s partition; true once herald.retire_generation moved it to notifications_kept because it or one of its deliveries still waited.';
COMMENT ON COLUMN herald.notifications.ios_interruption_level IS 'iOS aps.interruption-level: passive, active, time-sensitive or critical (ingest rejects others). NULL: not sent (iOS takes active).';
COMMENT ON COLUMN herald.notifications.ios_relevance_score IS 'iOS aps.relevance-score, 0 to 1: which of the app''s notifications (or Live Activities) leads its summary. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_filter_criteria IS 'iOS aps.filter-criteria: the Focus filter that lets it through. NULL: none.';
COMMENT ON COLUMN herald.notifications.ios_target_content_id IS 'iOS aps.target-content-id: the window or content a tap brings forward. NULL: none.';
COMMENT ON COLUMN herald.notifications.android_direct_boot_ok IS 'FCM android.direct_boot_ok: delivered to the app before the phone is unlocked after a restart. NULL: not sent.';
COMMENT ON COLUMN herald.notifications.android_proxy IS 'For a topic send, FCM android.notification.proxy (allow, deny or if_priority_lowered): whether Google Play services may show it. NULL: FCM''s default.';
COMMENT ON COLUMN herald.notifications.activity_id IS 'A Live Activity event''s activity: the app''s id for it (herald.live_activities.activity_id). NULL: no activity event, or a broadcast.';
COMMENT ON COLUMN herald.notifications.activity_event IS 'A Live Activity event: start, update or end (herald.start_activity, update_activity, end_activity, broadcast_activity). NULL: none.';
COMMENT ON COLUMN herald.notifications.activity_attributes_type IS 'A start''s ActivityAttributes type, as the app''s Swift names it (attributes-type). NULL for other events.';
COMMENT ON COLUMN herald.notifications.activity_attributes IS 'A start''s ActivityAttributes as JSON (attributes; Herald adds herald_activity when sending). NULL for other events.';
COMMENT ON COLUMN herald.notifications.activity_content_state IS 'The event''s ContentState as JSON (content-state); ingest gives an end without one the activity''s newest. NULL: none.';
COMMENT ON COLUMN herald.notifications.activity_stale_at IS 'When the activity shows as stale (aps.stale-date). NULL: not set.';
COMMENT ON COLUMN herald.notifications.activity_dismiss_at IS 'When an ended activity leaves the Lock Screen (aps.dismissal-date; a past time removes it at once). NULL: not set.';
COMMENT ON COLUMN herald.notifications.activity_event_at IS 'When the event happened (aps.timestamp): the newest wins, an older one ends superseded. Unless given, the call''s time (or just after the newest event).';
COMMENT ON COLUMN herald.notifications.activity_channel IS 'A broadcast''s channel name as the producer gave it (herald.broadcast_activity). NULL: not a broadcast.';
COMMENT ON COLUMN herald.notifications.broadcast_channel_id IS 'The herald.broadcast_channels row ingest sent the broadcast to. NULL: not a broadcast, or none sent.';
COMMENT ON COLUMN herald.notifications.push_type IS 'One of herald.push_types (widgets, voip, location, pushtotalk), set only by herald.send_push: its deliveries go to the devices'' tokens of that type. NULL: not such a push.';
COMMENT ON COLUMN herald.notifications.message_class IS 'service or marketing: how the phone makers'' push services (Xiaomi, OPPO, vivo, Honor, HarmonyOS) class it, each in its own fields; NULL: the app''s default_message_class.';
GRANT INSERT (app_id, idempotency_key, user_ref, device_ids, topic, title, body, data, image_url, sound, badge, android_channel_id, ios_category, ios_thread_id, deep_link, priority, ttl, expires_at, collapse_key, send_at, silent, dry_run, ios_interruption_level, ios_relevance_score, ios_filter_criteria, ios_target_content_id, android_direct_boot_ok, android_proxy, message_class), SELECT (id, app_id, idempotency_key, state, reason) ON herald.notifications TO herald_producer;
REVOKE ALL ON herald.notifications_g0 FROM herald_daemon;


-- herald.producer_apps
-- --------------------

CREATE TABLE herald.producer_apps (
    producer regrole NOT NULL,
    app_id text NOT NULL,
    granted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT producer_apps_pkey PRIMARY KEY (producer, app_id),
    CONSTRAINT producer_apps_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE
);
COMMENT ON TABLE herald.producer_apps IS 'Which roles may act for which apps as producers, one row per grant, written by operators (herald.acts_for).';
COMMENT ON COLUMN herald.producer_apps.producer IS 'The role granted: its member logins act for the app; herald_producer itself means every producer.';
COMMENT ON COLUMN herald.producer_apps.app_id IS 'The app it may act for (herald.apps); the grant goes with it.';
COMMENT ON COLUMN herald.producer_apps.granted_at IS 'When the grant was made.';
GRANT DELETE, INSERT, SELECT ON herald.producer_apps TO herald_operator;


-- herald.providers
-- ----------------

CREATE TABLE herald.providers (
    provider text NOT NULL,
    settings regclass,
    CONSTRAINT providers_pkey PRIMARY KEY (provider)
);
COMMENT ON TABLE herald.providers IS 'The push services Herald sends through, one row per provider; rows belong to the migrations.';
COMMENT ON COLUMN herald.providers.provider IS 'The provider''s name, as the daemon''s registry of providers and herald.routes.provider name it.';
COMMENT ON COLUMN herald.providers.settings IS 'The table or view of its settings, one row per app by app_id; NULL: no settings of apps.';
REVOKE ALL ON herald.providers FROM herald_daemon;
GRANT SELECT ON herald.providers TO herald_operator;
GRANT SELECT ON herald.providers TO herald_daemon;


-- herald.accepted_credentials
-- ---------------------------

CREATE TABLE herald.accepted_credentials (
    app_id text NOT NULL,
    provider text NOT NULL,
    account text NOT NULL,
    first_accepted_at timestamp with time zone NOT NULL,
    CONSTRAINT accepted_credentials_pkey PRIMARY KEY (app_id, provider, account),
    CONSTRAINT accepted_credentials_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT accepted_credentials_provider_fkey FOREIGN KEY (provider) REFERENCES herald.providers(provider)
);
COMMENT ON TABLE herald.accepted_credentials IS 'Credentials a provider has accepted an app''s send with, one row each, written by the daemon that saw it first: a refusal that means a dead token or another app''s credentials alike (Huawei''s 80300007) is read as a dead token only for credentials here.';
COMMENT ON COLUMN herald.accepted_credentials.app_id IS 'The app whose send was accepted (herald.apps).';
COMMENT ON COLUMN herald.accepted_credentials.provider IS 'The provider (herald.providers).';
COMMENT ON COLUMN herald.accepted_credentials.account IS 'The credentials as the provider names them: Huawei''s OAuth 2.0 client id, a HarmonyOS service account''s project and key id.';
COMMENT ON COLUMN herald.accepted_credentials.first_accepted_at IS 'When a daemon first saw the provider accept a send made with them.';
REVOKE ALL ON herald.accepted_credentials FROM herald_daemon;
GRANT INSERT, SELECT ON herald.accepted_credentials TO herald_daemon;
GRANT DELETE, SELECT ON herald.accepted_credentials TO herald_operator;


-- herald.provider_pauses
-- ----------------------

CREATE TABLE herald.provider_pauses (
    provider text NOT NULL,
    account text NOT NULL,
    part text DEFAULT ''::text NOT NULL,
    paused_until timestamp with time zone NOT NULL,
    reason text NOT NULL,
    paused_at timestamp with time zone NOT NULL,
    CONSTRAINT provider_pauses_pkey PRIMARY KEY (provider, account, part),
    CONSTRAINT provider_pauses_provider_fkey FOREIGN KEY (provider) REFERENCES herald.providers(provider)
);
COMMENT ON TABLE herald.provider_pauses IS 'Limits a provider set on what an app sends (traffic control, a rate, a daily quota), as the daemon that met one wrote it: every daemon holds back what it covers until paused_until.';
COMMENT ON COLUMN herald.provider_pauses.provider IS 'The provider (herald.providers).';
COMMENT ON COLUMN herald.provider_pauses.account IS 'Whose sends it holds back, as its provider names them: "app shop", "client 106892911".';
COMMENT ON COLUMN herald.provider_pauses.part IS 'Which of them: '''' all, or a message class (''marketing'') when the limit is that class''s.';
COMMENT ON COLUMN herald.provider_pauses.paused_until IS 'Until when: the provider''s Retry-After, the reset of its quota, or its route''s own pause.';
COMMENT ON COLUMN herald.provider_pauses.reason IS 'The provider''s answer that set it.';
COMMENT ON COLUMN herald.provider_pauses.paused_at IS 'When the daemon met it.';
REVOKE ALL ON herald.provider_pauses FROM herald_daemon;
GRANT INSERT, SELECT, UPDATE ON herald.provider_pauses TO herald_daemon;
GRANT DELETE, SELECT ON herald.provider_pauses TO herald_operator;


-- herald.receipt_nonces
-- ---------------------

CREATE TABLE herald.receipt_nonces (
    provider text NOT NULL,
    app_id text NOT NULL,
    nonce text NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    CONSTRAINT receipt_nonces_pkey PRIMARY KEY (provider, app_id, nonce)
);
CREATE INDEX receipt_nonces_seen ON herald.receipt_nonces USING btree (seen_at);
COMMENT ON TABLE herald.receipt_nonces IS 'The nonce of each provider receipt taken in the last ten minutes, per provider and app: a signed receipt posted again is refused as replayed. Kept by herald.record_receipts.';
COMMENT ON COLUMN herald.receipt_nonces.provider IS 'The provider whose receipt it was (herald.providers).';
COMMENT ON COLUMN herald.receipt_nonces.app_id IS 'The app the receipt was posted for (herald.apps).';
COMMENT ON COLUMN herald.receipt_nonces.nonce IS 'The nonce its signature covered (Push Kit: the X-HUAWEI-CALLBACK-ID header''s nonce).';
COMMENT ON COLUMN herald.receipt_nonces.seen_at IS 'When it was taken.';
GRANT SELECT ON herald.receipt_nonces TO herald_operator;


-- herald.redrives
-- ---------------

CREATE TABLE herald.redrives (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    redriven_at timestamp with time zone DEFAULT now() NOT NULL,
    redriven_by text DEFAULT CURRENT_USER NOT NULL,
    job_ids bigint[] NOT NULL,
    note text,
    delivery_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    CONSTRAINT redrives_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE herald.redrives IS 'One row per herald.redrive call that brought dead work back: when, by whom, which jobs and deliveries, and the operator''s note. An audit trail; Herald does not prune it.';
COMMENT ON COLUMN herald.redrives.id IS 'The redrive''s id.';
COMMENT ON COLUMN herald.redrives.redriven_at IS 'When the redrive ran.';
COMMENT ON COLUMN herald.redrives.redriven_by IS 'The login (session_user) that called herald.redrive.';
COMMENT ON COLUMN herald.redrives.job_ids IS 'The dead herald.jobs rows it brought back to ready, attempts reset; empty when none.';
COMMENT ON COLUMN herald.redrives.note IS 'The note the operator gave herald.redrive (why: an outage fixed, ...). NULL: none.';
COMMENT ON COLUMN herald.redrives.delivery_ids IS 'The dead herald.deliveries it brought back to queued, attempts reset; empty when none.';
REVOKE ALL ON herald.redrives FROM herald_daemon;
GRANT SELECT ON herald.redrives TO herald_operator;
GRANT DELETE, INSERT, SELECT, UPDATE ON herald.redrives TO herald_daemon;


-- herald.routes
-- -------------

CREATE TABLE herald.routes (
    route text NOT NULL,
    provider text NOT NULL,
    description text NOT NULL,
    scopes text[] NOT NULL,
    device_store_capacity integer,
    CONSTRAINT routes_pkey PRIMARY KEY (route),
    CONSTRAINT routes_provider_fkey FOREIGN KEY (provider) REFERENCES herald.providers(provider),
    CONSTRAINT routes_device_store_capacity_check CHECK ((device_store_capacity > 0)),
    CONSTRAINT routes_scopes_check CHECK ((cardinality(scopes) > 0))
);
COMMENT ON TABLE herald.routes IS 'The ways out, one row per route: its provider and the scopes it needs; rows belong to the migrations.';
COMMENT ON COLUMN herald.routes.route IS 'The route''s name, as herald.claim_sends returns it for each delivery.';
COMMENT ON COLUMN herald.routes.provider IS 'The provider that sends it (herald.providers).';
COMMENT ON COLUMN herald.routes.description IS 'The route in words, as operators read it in a delivery''s reason for waiting.';
COMMENT ON COLUMN herald.routes.scopes IS 'The herald.config_scopes it needs: its deliveries wait while any of them fails.';
COMMENT ON COLUMN herald.routes.device_store_capacity IS 'For a provider that keeps a bounded number of messages per offline device and drops them all past it: how many of one device''s unreported messages Herald lets it hold at once (80 for FCM, whose limit is 100; the margin is for messages the app''s own servers send, and sends repeated after a lost answer). Past it the device''s notifications are held (herald.deliveries.held_since). NULL: no such limit.';
REVOKE ALL ON herald.routes FROM herald_daemon;
GRANT SELECT ON herald.routes TO herald_operator;
GRANT SELECT ON herald.routes TO herald_daemon;


-- herald.route_saturation
-- -----------------------

CREATE TABLE herald.route_saturation (
    app_id text NOT NULL,
    route text NOT NULL,
    origin text DEFAULT ''::text NOT NULL,
    worker text NOT NULL,
    since timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    in_flight integer NOT NULL,
    postponed bigint NOT NULL,
    CONSTRAINT route_saturation_pkey PRIMARY KEY (app_id, route, origin, worker),
    CONSTRAINT route_saturation_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE ON DELETE CASCADE,
    CONSTRAINT route_saturation_route_fkey FOREIGN KEY (route) REFERENCES herald.routes(route)
);
COMMENT ON TABLE herald.route_saturation IS 'Routes whose window of sends in flight was full, one row per route and daemon; herald status lists recent ones.';
COMMENT ON COLUMN herald.route_saturation.app_id IS 'The app whose route it is (herald.apps); the row goes with it.';
COMMENT ON COLUMN herald.route_saturation.route IS 'The route (herald.routes).';
COMMENT ON COLUMN herald.route_saturation.origin IS 'For a Web Push subscription, the push service''s origin (a route of its own); '''' for other routes.';
COMMENT ON COLUMN herald.route_saturation.worker IS 'The daemon that saw it, by its HERALD_WORKER_ID (by default hostname:pid).';
COMMENT ON COLUMN herald.route_saturation.since IS 'When this episode began: the first full window after two quiet minutes.';
COMMENT ON COLUMN herald.route_saturation.seen_at IS 'When the window was last seen full; written at most once a minute, deleted after a day unseen.';
COMMENT ON COLUMN herald.route_saturation.in_flight IS 'The route''s sends in flight on that daemon when it was last seen full.';
COMMENT ON COLUMN herald.route_saturation.postponed IS 'Deliveries the full window postponed in this episode, not as attempts (one may count at each claim).';
GRANT SELECT ON herald.route_saturation TO herald_operator;


-- herald.schema_functions
-- -----------------------

CREATE TABLE herald.schema_functions (
    file text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT schema_functions_pkey PRIMARY KEY (file)
);
COMMENT ON TABLE herald.schema_functions IS 'The function files applied here, one row each, written by herald migrate; the daemon only reads it.';
COMMENT ON COLUMN herald.schema_functions.file IS 'The file''s name in migrations/functions/.';
COMMENT ON COLUMN herald.schema_functions.checksum IS 'The md5 of the file as last applied; herald migrate applies it again when its text differs.';
COMMENT ON COLUMN herald.schema_functions.applied_at IS 'When that text was applied.';
REVOKE ALL ON herald.schema_functions FROM herald_daemon;
GRANT SELECT ON herald.schema_functions TO herald_daemon;


-- herald.secrets
-- --------------

CREATE TABLE herald.secrets (
    name text NOT NULL,
    value bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT secrets_pkey PRIMARY KEY (name),
    CONSTRAINT secrets_value_check CHECK ((octet_length(value) >= 16))
);
COMMENT ON TABLE herald.secrets IS 'Secrets every daemon shares, one row each, made by herald migrate; daemons read them, producers cannot.';
COMMENT ON COLUMN herald.secrets.name IS 'The secret''s name: report_hmac signs the delivery report references payloads carry.';
COMMENT ON COLUMN herald.secrets.value IS 'The secret, from PostgreSQL''s random source; updating it rotates it, and older references stop opening.';
COMMENT ON COLUMN herald.secrets.created_at IS 'When the row was made; an update of the value leaves it.';
REVOKE ALL ON herald.secrets FROM herald_daemon;
GRANT SELECT ON herald.secrets TO herald_daemon;


-- herald.token_kinds
-- ------------------

CREATE TABLE herald.token_kinds (
    token_kind text NOT NULL,
    platforms text[] NOT NULL,
    description text NOT NULL,
    shape text,
    shape_description text,
    lowercase boolean DEFAULT false NOT NULL,
    endpoint_policy regclass,
    CONSTRAINT token_kinds_pkey PRIMARY KEY (token_kind),
    CONSTRAINT token_kinds_check CHECK (((shape IS NULL) = (shape_description IS NULL)))
);
COMMENT ON TABLE herald.token_kinds IS 'What a push token can be, one row per kind, and how registration checks it; rows belong to the migrations.';
COMMENT ON COLUMN herald.token_kinds.token_kind IS 'The kind''s name, as herald.devices.token_kind and herald.push_type_tokens.token_kind hold it.';
COMMENT ON COLUMN herald.token_kinds.platforms IS 'The platforms (herald.platforms) whose devices may hold a token of this kind.';
COMMENT ON COLUMN herald.token_kinds.description IS 'The kind in words, as herald.register_device''s errors list it.';
COMMENT ON COLUMN herald.token_kinds.shape IS 'A regular expression every token of the kind must match at registration; NULL: any token.';
COMMENT ON COLUMN herald.token_kinds.shape_description IS 'The shape in words, as the error refusing a token says it; NULL exactly when shape is.';
COMMENT ON COLUMN herald.token_kinds.lowercase IS 'Whether registration stores the token in lower case (hex tokens).';
COMMENT ON COLUMN herald.token_kinds.endpoint_policy IS 'For a Web Push subscription: the view or table of each app''s allowed hosts; NULL: not a subscription.';
REVOKE ALL ON herald.token_kinds FROM herald_daemon;
GRANT SELECT ON herald.token_kinds TO herald_operator;
GRANT SELECT ON herald.token_kinds TO herald_daemon;


-- herald.platforms
-- ----------------

CREATE TABLE herald.platforms (
    platform text NOT NULL,
    description text NOT NULL,
    payload_kind text NOT NULL,
    silent_payload_kind text NOT NULL,
    default_token_kind text NOT NULL,
    CONSTRAINT platforms_pkey PRIMARY KEY (platform),
    CONSTRAINT platforms_default_token_kind_fkey FOREIGN KEY (default_token_kind) REFERENCES herald.token_kinds(token_kind)
);
COMMENT ON TABLE herald.platforms IS 'The platforms a device can be, one row each, read by registration and ingest; rows belong to the migrations.';
COMMENT ON COLUMN herald.platforms.platform IS 'The platform''s name, as herald.devices.platform holds it.';
COMMENT ON COLUMN herald.platforms.description IS 'The platform in words, as herald.register_device''s error lists it.';
COMMENT ON COLUMN herald.platforms.payload_kind IS 'The payload kind ingest gives a delivery to a device of this platform.';
COMMENT ON COLUMN herald.platforms.silent_payload_kind IS 'The payload kind ingest gives a delivery of a silent notification to a device of this platform.';
COMMENT ON COLUMN herald.platforms.default_token_kind IS 'The token kind a device holds when registered without one, unless its app''s transport for the platform says another (herald.transport_token_kinds).';
REVOKE ALL ON herald.platforms FROM herald_daemon;
GRANT SELECT ON herald.platforms TO herald_operator;
GRANT SELECT ON herald.platforms TO herald_daemon;


-- herald.devices
-- --------------

CREATE TABLE herald.devices (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    app_id text NOT NULL,
    device_id text NOT NULL,
    platform text NOT NULL,
    push_token text,
    user_ref text,
    disabled_at timestamp with time zone,
    disabled_cause text,
    disabled_reason text,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_wakeup_at timestamp with time zone,
    web_p256dh bytea,
    web_auth bytea,
    token_kind text DEFAULT 'registration_token'::text NOT NULL,
    registration_started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_reported_at timestamp with time zone,
    notifications_off_at timestamp with time zone,
    notifications_off_reason text,
    CONSTRAINT devices_pkey PRIMARY KEY (id),
    CONSTRAINT devices_app_id_device_id_key UNIQUE (app_id, device_id),
    CONSTRAINT devices_app_id_push_token_key UNIQUE (app_id, push_token),
    CONSTRAINT devices_app_id_fkey FOREIGN KEY (app_id) REFERENCES herald.apps(app_id) ON UPDATE CASCADE,
    CONSTRAINT devices_platform_fkey FOREIGN KEY (platform) REFERENCES herald.platforms(platform),
    CONSTRAINT devices_token_kind_fkey FOREIGN KEY (token_kind) REFERENCES herald.token_kinds(token_kind),
    CONSTRAINT devices_check CHECK (((disabled_at IS NULL) = (disabled_reason IS NULL))),
    CONSTRAINT devices_check1 CHECK (((disabled_at IS NULL) = (disabled_cause IS NULL))),
    CONSTRAINT devices_check2 CHECK (((push_token IS NOT NULL) OR (disabled_at IS NOT NULL))),
    CONSTRAINT devices_device_id_check CHECK ((device_id <> ''::text)),
    CONSTRAINT devices_disabled_cause_check CHECK ((disabled_cause = ANY (ARRAY['token_invalid'::text, 'logout'::text, 'token_moved'::text, 'operator'::text]))),
    CONSTRAINT devices_push_token_check CHECK ((push_token <> ''::text))
);
ALTER TABLE herald.devices ADD CONSTRAINT "a device's subscription keys are whole" CHECK ((((web_p256dh IS NULL) AND (web_auth IS NULL)) OR ((octet_length(web_p256dh) = 65) AND (octet_length(web_auth) = 16)))) NOT VALID;
ALTER TABLE herald.devices ADD CONSTRAINT "notifications off has its reason" CHECK (((notifications_off_at IS NULL) = (notifications_off_reason IS NULL))) NOT VALID;
CREATE INDEX devices_enabled_by_user ON herald.devices USING btree (app_id, user_ref) WHERE (disabled_at IS NULL);
COMMENT ON TABLE herald.devices IS 'One row per app installation: its push token and the token''s kind, its user, and whether it is enabled (herald.register_device, herald.unregister_device). A device whose token died or moved, or that logged out, is disabled, never deleted: operators see when and why, and registering enables it again.';
COMMENT ON COLUMN herald.devices.id IS 'Herald''s id for the device, which herald.deliveries, herald.wakeups, herald.activity_tokens and herald.push_type_tokens name as device_id, and which every report reference carries.';
COMMENT ON COLUMN herald.devices.app_id IS 'The app the device belongs to (herald.apps); device_id and push_token are each unique within it.';
COMMENT ON COLUMN herald.devices.device_id IS 'The producer''s own stable id for the installation, unique per app: what herald.register_device, herald.unregister_device and a notification''s device_ids name it by.';
COMMENT ON COLUMN herald.devices.platform IS 'What the device is, one of herald.platforms (android, ios, web, harmony): it decides the payload kind of the deliveries ingest makes for it and which token kinds it may hold.';
COMMENT ON COLUMN herald.devices.push_token IS 'The device''s own token as herald.register_device took it: an FCM, APNs (hex, lower case), Huawei or HarmonyOS token, or a Web Push or UnifiedPush subscription''s endpoint. Unique per app; NULL once another device of the app registered it (token_moved).';
COMMENT ON COLUMN herald.devices.user_ref IS 'The producer''s id for the device''s user: a notification sent to a user_ref goes to every enabled device that has it. NULL: a device of no user, reached only by its device_id.';
COMMENT ON COLUMN herald.devices.disabled_at IS 'When the device was disabled; NULL while it is enabled. A disabled device gets no new deliveries and its waiting ones are cancelled; herald.register_device or herald.enable_device enables it again.';
COMMENT ON COLUMN herald.devices.disabled_cause IS 'Why the device is disabled, to group by: token_invalid (a provider declared its token dead; registering that token again keeps it disabled), logout (herald.unregister_device), token_moved (another device of the app registered its token) or operator (set by hand; no Herald function sets it). NULL while enabled.';
COMMENT ON COLUMN herald.devices.disabled_reason IS 'Why the device is disabled, in words: the provider''s error, the reason given to herald.unregister_device (''logged out'' unless said), or which device registered its token. NULL while enabled.';
COMMENT ON COLUMN herald.devices.registered_at IS 'When herald.register_device was last called for the device (a first registration or a token refresh). Dispatch does not disable a device for a dead token when it registered after the time the provider says that token stopped being valid.';
COMMENT ON COLUMN herald.devices.last_wakeup_at IS 'When the reconcile worker (herald.reconcile) last queued a silent wake-up for this iOS device because notifications sent to it went unreported; NULL if never. herald.wakeups has each wake-up.';
COMMENT ON COLUMN herald.devices.web_p256dh IS 'For a subscription token (token_kind web_subscription or unifiedpush): the subscription''s P-256 public key, 65 bytes uncompressed (RFC 8291), that dispatch encrypts each push to. NULL for other token kinds.';
COMMENT ON COLUMN herald.devices.web_auth IS 'For a subscription token (token_kind web_subscription or unifiedpush): the subscription''s 16-byte authentication secret (RFC 8291), used with web_p256dh to encrypt each push. NULL for other token kinds.';
COMMENT ON COLUMN herald.devices.token_kind IS 'What push_token is, one of herald.token_kinds; with a delivery''s payload kind it picks the route (herald.route_rules). Given to herald.register_device, or else the platform''s default (herald.platforms, herald.transport_token_kinds).';
COMMENT ON COLUMN herald.devices.registration_started_at IS 'When the device''s current registration began: its first herald.register_device, or the first after a logout or for another user_ref (a token refresh keeps it). Its report references (herald.pending_notifications) read only deliveries made since.';
COMMENT ON COLUMN herald.devices.last_reported_at IS 'When the app last reported a delivery to this device (herald.reconcile). A device that has reported since its registration began has its deliveries counted against its provider''s store (herald.routes.device_store_capacity). NULL: never.';
COMMENT ON COLUMN herald.devices.notifications_off_at IS 'When a provider''s receipt last said the device did not show a notification because notifications are turned off (by the user, or the app''s own switch); NULL once a later receipt says one reached it. The device stays enabled.';
COMMENT ON COLUMN herald.devices.notifications_off_reason IS 'The receipt''s words for it. NULL with notifications_off_at.';


-- herald.activity_tokens
-- ----------------------

CREATE TABLE herald.activity_tokens (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    device_id bigint NOT NULL,
    kind text NOT NULL,
    attributes_type text NOT NULL,
    live_activity_id bigint,
    token text NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_delivery_id bigint,
    ended_at timestamp with time zone,
    ended_cause text,
    ended_reason text,
    app_id text,
    CONSTRAINT activity_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT activity_tokens_device_id_fkey FOREIGN KEY (device_id) REFERENCES herald.devices(id) ON DELETE CASCADE,
    CONSTRAINT activity_tokens_live_activity_id_fkey FOREIGN KEY (live_activity_id) REFERENCES herald.live_activities(id) ON DELETE CASCADE,
    CONSTRAINT activity_tokens_check CHECK (((kind = 'update'::text) = (live_activity_id IS NOT NULL))),
    CONSTRAINT activity_tokens_check1 CHECK (((ended_at IS NULL) = (ended_cause IS NULL))),
    CONSTRAINT activity_tokens_check2 CHECK (((ended_at IS NULL) = (ended_reason IS NULL))),
    CONSTRAINT activity_tokens_ended_cause_check CHECK ((ended_cause = ANY (ARRAY['activity_ended'::text, 'dismissed'::text, 'unregistered'::text, 'replaced'::text, 'token_invalid'::text]))),
    CONSTRAINT activity_tokens_kind_check CHECK ((kind = ANY (ARRAY['push_to_start'::text, 'update'::text]))),
    CONSTRAINT activity_tokens_token_check CHECK ((token ~ '^[0-9a-f]{64,200}$'::text))
);
CREATE UNIQUE INDEX activity_tokens_push_to_start ON herald.activity_tokens USING btree (device_id, attributes_type) WHERE ((kind = 'push_to_start'::text) AND (ended_at IS NULL));
CREATE UNIQUE INDEX activity_tokens_push_to_start_live ON herald.activity_tokens USING btree (app_id, attributes_type, token) WHERE ((kind = 'push_to_start'::text) AND (ended_at IS NULL));
CREATE INDEX activity_tokens_token ON herald.activity_tokens USING btree (token) WHERE (ended_at IS NULL);
CREATE UNIQUE INDEX activity_tokens_update ON herald.activity_tokens USING btree (live_activity_id, device_id) WHERE ((kind = 'update'::text) AND (ended_at IS NULL));
COMMENT ON TABLE herald.activity_tokens IS 'One row per Live Activity token of a device: its push-to-start token for an activity type, or a running activity''s update token (herald.register_activity_token). A token replaced or ended stays, with when and why, until retention deletes it.';
COMMENT ON COLUMN herald.activity_tokens.id IS 'Herald''s id for the token, which herald.deliveries.activity_token_id names.';
COMMENT ON COLUMN herald.activity_tokens.device_id IS 'The iPhone it is on (herald.devices.id): a disabled device is sent nothing through it, and the token is deleted with the device.';
COMMENT ON COLUMN herald.activity_tokens.kind IS 'push_to_start: the app''s token for starting activities of attributes_type on the device (ActivityKit''s pushToStartToken); update: one running activity''s token (its pushToken).';
COMMENT ON COLUMN herald.activity_tokens.attributes_type IS 'The ActivityAttributes type it is for, as ActivityKit names it: a start of that type goes to the push-to-start tokens; an update token''s is its activity''s.';
COMMENT ON COLUMN herald.activity_tokens.live_activity_id IS 'An update token''s activity (herald.live_activities.id); NULL for a push-to-start token.';
COMMENT ON COLUMN herald.activity_tokens.token IS 'The APNs token as ActivityKit gave it, in hex, lower case; live on one device of the app at a time. Operators cannot read it.';
COMMENT ON COLUMN herald.activity_tokens.registered_at IS 'When herald.register_activity_token registered it; a new token of the same kind replaces it as a new row.';
COMMENT ON COLUMN herald.activity_tokens.last_delivery_id IS 'An update token''s newest delivery (herald.deliveries.id), set by ingest or by the catch-up send at registration: an older one still waiting is superseded by it. NULL for a push-to-start token, and before any.';
COMMENT ON COLUMN herald.activity_tokens.ended_at IS 'When the token ended; NULL while it is live. An ended token takes no new event (one ended by its activity''s end still takes that end), and retention deletes it after the retention period.';
COMMENT ON COLUMN herald.activity_tokens.ended_cause IS 'Why it ended: activity_ended (its activity''s end was ingested), dismissed or unregistered (herald.unregister_activity_token, for an update or a push-to-start token), replaced (a new token took its place) or token_invalid (the provider declared it dead). NULL while live.';
COMMENT ON COLUMN herald.activity_tokens.ended_reason IS 'Why it ended, in words: the provider''s reason, the end''s notification, what the app said, or which device registered it again. NULL while live.';
COMMENT ON COLUMN herald.activity_tokens.app_id IS 'The app of its device (herald.devices.app_id): a push-to-start token is live on at most one device of an app for each attributes type (activity_tokens_push_to_start_live). NULL only for one registered during the upgrade to migration 44.';
GRANT SELECT (id, device_id, kind, attributes_type, live_activity_id, registered_at, last_delivery_id, ended_at, ended_cause, ended_reason, app_id) ON herald.activity_tokens TO herald_operator;


-- herald.push_types
-- -----------------

CREATE TABLE herald.push_types (
    push_type text NOT NULL,
    description text NOT NULL,
    payload_kind text NOT NULL,
    token_kind text NOT NULL,
    max_payload_bytes integer NOT NULL,
    takes_data boolean NOT NULL,
    may_be_normal boolean NOT NULL,
    default_ttl interval,
    max_ttl interval NOT NULL,
    max_ttl_reason text NOT NULL,
    CONSTRAINT push_types_pkey PRIMARY KEY (push_type),
    CONSTRAINT push_types_payload_kind_key UNIQUE (payload_kind),
    CONSTRAINT push_types_token_kind_key UNIQUE (token_kind),
    CONSTRAINT push_types_token_kind_fkey FOREIGN KEY (token_kind) REFERENCES herald.token_kinds(token_kind)
);
COMMENT ON TABLE herald.push_types IS 'APNs'' other push types, sent with herald.send_push, one row each; rows belong to the migrations.';
COMMENT ON COLUMN herald.push_types.push_type IS 'The type''s name, as APNs names it (apns-push-type) and herald.send_push takes it.';
COMMENT ON COLUMN herald.push_types.description IS 'The type in words, as herald.send_push''s error lists it.';
COMMENT ON COLUMN herald.push_types.payload_kind IS 'The payload kind of its deliveries (herald.deliveries.payload_kind).';
COMMENT ON COLUMN herald.push_types.token_kind IS 'The token kind it goes to, registered beside the device in herald.push_type_tokens.';
COMMENT ON COLUMN herald.push_types.max_payload_bytes IS 'APNs'' limit in bytes for the JSON sent (data and Herald''s keys); ingest rejects more.';
COMMENT ON COLUMN herald.push_types.takes_data IS 'Whether the producer''s data is sent; when false, ingest rejects a notification with data.';
COMMENT ON COLUMN herald.push_types.may_be_normal IS 'Whether priority ''normal'' (APNs'' 5) may be asked for; when false, ingest rejects it.';
COMMENT ON COLUMN herald.push_types.default_ttl IS 'How long it is tried when the producer gives no ttl or expires_at; NULL: the app''s default_ttl.';
COMMENT ON COLUMN herald.push_types.max_ttl IS 'The longest it may be tried; ingest rejects a ttl or expires_at beyond it.';
COMMENT ON COLUMN herald.push_types.max_ttl_reason IS 'Why it may be tried no longer than max_ttl, as ingest''s refusal of a longer ttl or expires_at says it.';
REVOKE ALL ON herald.push_types FROM herald_daemon;
GRANT SELECT ON herald.push_types TO herald_operator;
GRANT SELECT ON herald.push_types TO herald_daemon;


-- herald.push_type_tokens
-- -----------------------

CREATE TABLE herald.push_type_tokens (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    device_id bigint NOT NULL,
    token_kind text NOT NULL,
    token text NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled_at timestamp with time zone,
    disabled_cause text,
    disabled_reason text,
    app_id text,
    CONSTRAINT push_type_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT push_type_tokens_device_id_token_kind_key UNIQUE (device_id, token_kind),
    CONSTRAINT push_type_tokens_device_id_fkey FOREIGN KEY (device_id) REFERENCES herald.devices(id) ON DELETE CASCADE,
    CONSTRAINT push_type_tokens_token_kind_fkey FOREIGN KEY (token_kind) REFERENCES herald.push_types(token_kind),
    CONSTRAINT push_type_tokens_check CHECK ((((disabled_at IS NULL) = (disabled_cause IS NULL)) AND ((disabled_at IS NULL) = (disabled_reason IS NULL)))),
    CONSTRAINT push_type_tokens_disabled_cause_check CHECK ((disabled_cause = ANY (ARRAY['token_invalid'::text, 'unregistered'::text, 'token_moved'::text]))),
    CONSTRAINT push_type_tokens_token_check CHECK (((token ~ '^([0-9a-f]{2}){32,}$'::text) AND (octet_length(token) <= 8192)))
);
CREATE UNIQUE INDEX push_type_tokens_live ON herald.push_type_tokens USING btree (app_id, token_kind, token) WHERE (disabled_at IS NULL);
COMMENT ON TABLE herald.push_type_tokens IS 'One row per device and push type: the device''s token for APNs'' widget, VoIP, location or Push to Talk pushes (herald.register_push_type_token), which herald.send_push sends to. Disabling one leaves the device enabled.';
COMMENT ON COLUMN herald.push_type_tokens.id IS 'Herald''s id for the token, which herald.deliveries.push_type_token_id names.';
COMMENT ON COLUMN herald.push_type_tokens.device_id IS 'The device it belongs to (herald.devices.id): a disabled device is sent none of its pushes, and the token is deleted with the device.';
COMMENT ON COLUMN herald.push_type_tokens.token_kind IS 'The token''s kind, which names its push type in herald.push_types: apns_widgets_token, apns_voip_token, apns_location_token or apns_pushtotalk_token. One row per device and kind.';
COMMENT ON COLUMN herald.push_type_tokens.token IS 'The token as the app''s framework gave it, in hex, lower case; live on one device of the app at a time. Operators cannot read it (herald.notification_journey shows its hint).';
COMMENT ON COLUMN herald.push_type_tokens.registered_at IS 'When this token was registered by herald.register_push_type_token (first, or replacing or re-enabling the type''s previous token). Dispatch does not disable a token registered after the time APNs says it stopped being valid.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_at IS 'When the token was disabled; NULL while it is live. Ingest sends nothing of its type to the device while it is disabled, and retention deletes it once disabled for longer than the retention period.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_cause IS 'Why it is disabled: token_invalid (dispatch: APNs declared it dead, and registering the same token again keeps it disabled), unregistered (herald.unregister_push_type_token) or token_moved (another device of the app registered it). NULL while live.';
COMMENT ON COLUMN herald.push_type_tokens.disabled_reason IS 'Why it is disabled, in words: APNs'' reason, ''the app unregistered it'', or which device registered it again. NULL while live.';
COMMENT ON COLUMN herald.push_type_tokens.app_id IS 'The app of its device (herald.devices.app_id): a token is live on at most one device of an app (push_type_tokens_live). NULL only for one registered during the upgrade to migration 44.';
GRANT SELECT (id, device_id, token_kind, registered_at, disabled_at, disabled_cause, disabled_reason, app_id) ON herald.push_type_tokens TO herald_operator;


-- herald.route_targets
-- --------------------

CREATE TABLE herald.route_targets (
    payload_kind text NOT NULL,
    token_kind text,
    route text NOT NULL,
    CONSTRAINT route_targets_payload_kind_token_kind_key UNIQUE NULLS NOT DISTINCT (payload_kind, token_kind),
    CONSTRAINT route_targets_route_fkey FOREIGN KEY (route) REFERENCES herald.routes(route),
    CONSTRAINT route_targets_token_kind_fkey FOREIGN KEY (token_kind) REFERENCES herald.token_kinds(token_kind)
);
COMMENT ON TABLE herald.route_targets IS 'The routing rule: a delivery''s route by payload and token kind (no row: not sent); rows belong to migrations.';
COMMENT ON COLUMN herald.route_targets.payload_kind IS 'The delivery''s payload kind (herald.deliveries.payload_kind).';
COMMENT ON COLUMN herald.route_targets.token_kind IS 'The kind of the token it goes to (herald.token_kinds); NULL: no device (a topic, a broadcast channel).';
COMMENT ON COLUMN herald.route_targets.route IS 'The route it takes (herald.routes).';
REVOKE ALL ON herald.route_targets FROM herald_daemon;
GRANT SELECT ON herald.route_targets TO herald_operator;
GRANT SELECT ON herald.route_targets TO herald_daemon;


-- herald.transport_token_kinds
-- ----------------------------

CREATE TABLE herald.transport_token_kinds (
    platform text NOT NULL,
    transport text NOT NULL,
    token_kind text NOT NULL,
    CONSTRAINT transport_token_kinds_pkey PRIMARY KEY (platform, transport),
    CONSTRAINT transport_token_kinds_platform_fkey FOREIGN KEY (platform) REFERENCES herald.platforms(platform),
    CONSTRAINT transport_token_kinds_token_kind_fkey FOREIGN KEY (token_kind) REFERENCES herald.token_kinds(token_kind),
    CONSTRAINT transport_token_kinds_platform_check CHECK ((platform = 'ios'::text))
);
COMMENT ON TABLE herald.transport_token_kinds IS 'The token kind a device of a platform holds when registered without one, by the transport its app chose for that platform (herald.apps.ios_transport); no row: the platform''s default_token_kind. Rows belong to the migrations.';
COMMENT ON COLUMN herald.transport_token_kinds.platform IS 'The device''s platform (herald.platforms).';
COMMENT ON COLUMN herald.transport_token_kinds.transport IS 'The app''s transport for the platform, as herald.apps.ios_transport holds it.';
COMMENT ON COLUMN herald.transport_token_kinds.token_kind IS 'The token kind such a device holds (herald.token_kinds).';
REVOKE ALL ON herald.transport_token_kinds FROM herald_daemon;
GRANT SELECT ON herald.transport_token_kinds TO herald_operator;
GRANT SELECT ON herald.transport_token_kinds TO herald_daemon;


-- herald.wakeups
-- --------------

CREATE TABLE herald.wakeups (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    device_id bigint NOT NULL,
    report_id bigint,
    missed integer NOT NULL,
    notification_id bigint,
    created_at timestamp with time zone NOT NULL,
    quiet_until timestamp with time zone NOT NULL,
    CONSTRAINT wakeups_pkey PRIMARY KEY (id),
    CONSTRAINT "one wake-up per device per quiet period" EXCLUDE USING gist (int8range(device_id, device_id, '[]'::text) WITH &&, tstzrange(created_at, quiet_until) WITH &&),
    CONSTRAINT wakeups_device_id_fkey FOREIGN KEY (device_id) REFERENCES herald.devices(id) ON DELETE CASCADE,
    CONSTRAINT wakeups_check CHECK ((quiet_until > created_at))
);
CREATE INDEX wakeups_created ON herald.wakeups USING btree (created_at);
COMMENT ON TABLE herald.wakeups IS 'One row per wake-up: a silent push herald.reconcile sent an iOS device whose report showed it missed notifications (APNs keeps only the newest), or the catch-up message an Android device gets when its store at FCM is full and its notifications are held. The exclusion constraint keeps one per device per quiet period across all daemons; pruned by herald.prune_records.';
COMMENT ON COLUMN herald.wakeups.id IS 'The wake-up''s id; its notification''s idempotency key is herald-wakeup-<id>.';
COMMENT ON COLUMN herald.wakeups.device_id IS 'The device woken (herald.devices.id); the row goes with the device.';
COMMENT ON COLUMN herald.wakeups.report_id IS 'The report that revealed the gap (herald.delivery_reports.id, the newest of the batch''s for the device). NULL for a catch-up message, which no report prompts.';
COMMENT ON COLUMN herald.wakeups.missed IS 'How many notifications the device missed when it was decided: for iOS its alerts sent but unreported, for a catch-up message those held; what the woken app fetches (herald.missed_notifications, herald.pending_notifications).';
COMMENT ON COLUMN herald.wakeups.notification_id IS 'The silent notification (origin wakeup) made for it, with one ios_wakeup or android_wakeup delivery; set in the same transaction.';
COMMENT ON COLUMN herald.wakeups.created_at IS 'When the wake-up was decided: the start of the device''s quiet period.';
COMMENT ON COLUMN herald.wakeups.quiet_until IS 'The quiet period''s end (created_at plus HERALD_WAKEUP_INTERVAL): no other wake-up for the device before it.';


-- herald.worker_locks
-- -------------------

CREATE TABLE herald.worker_locks (
    name text NOT NULL,
    CONSTRAINT worker_locks_pkey PRIMARY KEY (name)
);
COMMENT ON TABLE herald.worker_locks IS 'Rows a worker locks to do alone what the row''s name says; only daemons and Herald''s own functions can lock them (no advisory lock, which any session can take).';
COMMENT ON COLUMN herald.worker_locks.name IS '''generations'': making, opening and retiring generations (herald.open_generation, retire_generation, drop_generation); ''live activities of <app>'': ingesting that app''s Live Activity events (herald.ingest_activity_events), a row made the first time.';
REVOKE ALL ON herald.worker_locks FROM herald_daemon;
GRANT INSERT, SELECT, UPDATE ON herald.worker_locks TO herald_daemon;


-- herald.schema_migrations
-- ------------------------

COMMENT ON TABLE herald.schema_migrations IS 'The numbered migrations applied here, one row each, written by herald migrate; the daemon only reads it.';
COMMENT ON COLUMN herald.schema_migrations.version IS 'The migration''s number (the NNN of migrations/NNN_name.sql).';
COMMENT ON COLUMN herald.schema_migrations.name IS 'The migration''s file name, without .sql.';
COMMENT ON COLUMN herald.schema_migrations.checksum IS 'The md5 of the file as applied; herald migrate warns when the file has changed since.';
COMMENT ON COLUMN herald.schema_migrations.applied_at IS 'When it was applied.';
REVOKE ALL ON herald.schema_migrations FROM herald_daemon;
GRANT SELECT ON herald.schema_migrations TO herald_daemon;

-- The sequences' owners, positions and grants
-- -------------------------------------------

ALTER SEQUENCE herald.deliveries_id_seq OWNED BY herald.deliveries.id;
ALTER SEQUENCE herald.delivery_reports_id_seq OWNED BY herald.delivery_reports.id;
