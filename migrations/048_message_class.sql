-- A notification's message class, the producer's word for how the phone makers' push services
-- treat it: 'service' (what the user asked for or must know: a message, an order, an account's
-- security) or 'marketing' (content and promotions). Xiaomi, OPPO, vivo, Honor and HarmonyOS
-- each limit marketing messages to a few a day on each phone and show them quietly, and each
-- names the classes its own way; each provider maps the class to its own fields, so that a
-- producer never writes a vendor's. FCM, APNs and Web Push have no such classes.
-- Ingest checks the notification's value (a bad one rejects it, saying so), not the table: an
-- INSERT a producer writes by hand is kept whatever it holds. NULL: the app's default.
ALTER TABLE herald.notifications ADD COLUMN message_class text;
COMMENT ON COLUMN herald.notifications.message_class IS 'service or marketing: how the phone makers'' push services (Xiaomi, OPPO, vivo, Honor, HarmonyOS) class it, each in its own fields; NULL: the app''s default_message_class.';
GRANT INSERT (message_class) ON herald.notifications TO herald_producer;

-- Marketing unless the app says otherwise: a vendor that finds a marketing message sent as a
-- service one may cut the app's quota, so a notification is a service message only when
-- someone said so.
ALTER TABLE herald.apps ADD COLUMN default_message_class text NOT NULL DEFAULT 'marketing'
    CHECK (default_message_class IN ('service', 'marketing'));
COMMENT ON COLUMN herald.apps.default_message_class IS 'The message class of a notification that names none: marketing (the default) or service.';

-- Until now a HarmonyOS app's category applied to every notification; from here it is the
-- category of its service notifications, and a marketing one goes as MARKETING. An app that had
-- a service category keeps sending as it did: its notifications are service ones by default.
UPDATE herald.apps a SET default_message_class = 'service'
FROM herald.app_harmony h WHERE h.app_id = a.app_id AND h.category <> 'MARKETING';
COMMENT ON COLUMN herald.app_harmony.category IS 'The category its service notifications go as (marketing ones go as MARKETING); any but MARKETING needs Huawei''s right to classify notifications.';

-- herald.send takes message_class (functions/producers.sql makes it again).
DROP FUNCTION IF EXISTS herald.send(text, text, text[], text, text, text, jsonb, text, text, integer, text, text, text, text,
                                    text, text, interval, timestamp with time zone, text, timestamp with time zone, boolean,
                                    boolean, text, double precision, text, text, boolean, text);
