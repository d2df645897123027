-- Delivery truth, from the providers: what a provider's receipt says became of a message it
-- took (Huawei Push Kit's, for Android and HarmonyOS, first). The daemon's endpoint takes each
-- receipt (POST /v1/receipts/{provider}/{app}), checks it with the app's callback credentials,
-- and herald.record_receipts records it on its delivery and acts on the device.

-- The callback user name and key of the app's receipt configuration in AppGallery Connect,
-- which sign every receipt Push Kit posts (X-HUAWEI-CALLBACK-ID), and the receipt id that picks
-- that configuration for the app's messages (none: the app's default configuration).
ALTER TABLE herald.app_hms
    ADD COLUMN receipt_username text CHECK (receipt_username ~ '^[^[:cntrl:]]{1,128}$'),
    ADD COLUMN receipt_key_file text CHECK (receipt_key_file <> ''),
    ADD COLUMN receipt_id text CHECK (receipt_id ~ '^[A-Za-z0-9_-]{1,64}$'),
    ADD CONSTRAINT "a receipt configuration has a user name and a key" CHECK (
        (receipt_username IS NULL) = (receipt_key_file IS NULL));
COMMENT ON COLUMN herald.app_hms.receipt_username IS 'The callback user name of the app''s receipt configuration in AppGallery Connect: with receipt_key_file, receipts posted to /v1/receipts/hms/{app} are checked and recorded. NULL: receipts are refused.';
COMMENT ON COLUMN herald.app_hms.receipt_key_file IS 'A file holding the receipt configuration''s callback key, read by the daemons'' endpoints; the key never enters the database. NULL with receipt_username.';
COMMENT ON COLUMN herald.app_hms.receipt_id IS 'The receipt configuration''s id (AppGallery Connect), sent with every message as android.receipt_id so its receipts go to that configuration''s URL. NULL: the app''s default receipt configuration.';

ALTER TABLE herald.app_harmony
    ADD COLUMN receipt_username text CHECK (receipt_username ~ '^[^[:cntrl:]]{1,128}$'),
    ADD COLUMN receipt_key_file text CHECK (receipt_key_file <> ''),
    ADD COLUMN receipt_id text CHECK (receipt_id ~ '^[A-Za-z0-9_-]{1,64}$'),
    ADD CONSTRAINT "a receipt configuration has a user name and a key" CHECK (
        (receipt_username IS NULL) = (receipt_key_file IS NULL));
COMMENT ON COLUMN herald.app_harmony.receipt_username IS 'The callback user name of the app''s receipt configuration (V2) in AppGallery Connect: with receipt_key_file, receipts posted to /v1/receipts/harmony/{app} are checked and recorded. NULL: receipts are refused.';
COMMENT ON COLUMN herald.app_harmony.receipt_key_file IS 'A file holding the receipt configuration''s callback key, read by the daemons'' endpoints; the key never enters the database. NULL with receipt_username.';
COMMENT ON COLUMN herald.app_harmony.receipt_id IS 'The receipt configuration''s id (AppGallery Connect), sent with every message as pushOptions.receiptId. NULL: the app''s default receipt configuration.';

-- The latest receipt of each delivery. Columns without a default: adding them rewrites nothing.
ALTER TABLE herald.deliveries
    ADD COLUMN receipt text,
    ADD COLUMN receipt_reason text,
    ADD COLUMN receipt_at timestamptz;
COMMENT ON COLUMN herald.deliveries.receipt IS 'What the provider''s receipt says (herald.record_receipts): delivered (it reached the device) or not_delivered (receipt_reason says why). A delivered receipt is final; a later not_delivered one replaces an earlier one. NULL: no receipt (the provider sends none, or the app did not set them up).';
COMMENT ON COLUMN herald.deliveries.receipt_reason IS 'The receipt''s meaning in words, with the provider''s code: Huawei Push Kit receipt 6: the notification was not shown … NULL: no receipt.';
COMMENT ON COLUMN herald.deliveries.receipt_at IS 'When the provider says it happened (Push Kit: when it reached the device, or when the receipt was made if it did not). NULL: no receipt.';

-- What a device's receipts say of it that is not a dead token: its user turned its notifications
-- off (Push Kit's receipt 6), until a later receipt says one was shown. The backend reads it in
-- the device feed (notifications_off, notifications_on); the device stays enabled.
-- The checks go on NOT VALID (as in 024): every row meets them, and proving it would read the
-- whole table under its lock, holding up every worker.
ALTER TABLE herald.devices
    ADD COLUMN notifications_off_at timestamptz,
    ADD COLUMN notifications_off_reason text,
    ADD CONSTRAINT "notifications off has its reason" CHECK (
        (notifications_off_at IS NULL) = (notifications_off_reason IS NULL)) NOT VALID;
COMMENT ON COLUMN herald.devices.notifications_off_at IS 'When a provider''s receipt last said the device did not show a notification because notifications are turned off (by the user, or the app''s own switch); NULL once a later receipt says one reached it. The device stays enabled.';
COMMENT ON COLUMN herald.devices.notifications_off_reason IS 'The receipt''s words for it. NULL with notifications_off_at.';

ALTER TABLE herald.device_changes DROP CONSTRAINT device_changes_change_check;
ALTER TABLE herald.device_changes ADD CONSTRAINT device_changes_change_check CHECK (change = ANY (ARRAY[
    'token_invalid', 'token_moved', 'logged_out', 'disabled', 'enabled', 'notifications_off', 'notifications_on']))
    NOT VALID;
COMMENT ON COLUMN herald.device_changes.change IS 'token_invalid (a provider declared its token dead), token_moved (another device of the app registered its token), logged_out (herald.unregister_device), disabled (by an operator), enabled (registered again, or herald.enable_device), notifications_off (a provider''s receipt says the device''s notifications are turned off; it stays enabled) or notifications_on (a later receipt says one reached it).';
CREATE TRIGGER devices_record_notification_changes AFTER UPDATE OF notifications_off_at ON herald.devices
    FOR EACH ROW WHEN ((OLD.notifications_off_at IS NULL) IS DISTINCT FROM (NEW.notifications_off_at IS NULL))
    EXECUTE FUNCTION herald.record_device_change();

-- The nonces of the receipts taken in the last ten minutes, so that a receipt's signed header
-- cannot be posted twice (herald.record_receipts); older ones are deleted as new ones come.
CREATE TABLE herald.receipt_nonces (
    provider text NOT NULL,
    app_id   text NOT NULL,
    nonce    text NOT NULL,
    seen_at  timestamptz NOT NULL,
    PRIMARY KEY (provider, app_id, nonce)
);
CREATE INDEX receipt_nonces_seen ON herald.receipt_nonces (seen_at);
COMMENT ON TABLE herald.receipt_nonces IS 'The nonce of each provider receipt taken in the last ten minutes, per provider and app: a signed receipt posted again is refused as replayed. Kept by herald.record_receipts.';
COMMENT ON COLUMN herald.receipt_nonces.provider IS 'The provider whose receipt it was (herald.providers).';
COMMENT ON COLUMN herald.receipt_nonces.app_id IS 'The app the receipt was posted for (herald.apps).';
COMMENT ON COLUMN herald.receipt_nonces.nonce IS 'The nonce its signature covered (Push Kit: the X-HUAWEI-CALLBACK-ID header''s nonce).';
COMMENT ON COLUMN herald.receipt_nonces.seen_at IS 'When it was taken.';
REVOKE ALL ON herald.receipt_nonces FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE, DELETE ON herald.receipt_nonces TO herald_daemon;
GRANT SELECT ON herald.receipt_nonces TO herald_operator;

-- One receipt as the endpoint read it, for herald.record_receipts.
CREATE TYPE herald.provider_receipt AS (
    -- The delivery the send tagged the message with (Push Kit's biTag); NULL: not Herald's tag.
    delivery_id bigint,
    token       text,
    -- The provider's id of the send (Push Kit's requestId).
    message_id  text,
    delivered   boolean,
    meaning     text,
    -- Epoch seconds, the provider's time.
    at          float8,
    -- What it proves of the device: none, token_dead, notifications_off.
    effect      text,
    -- The delivery's report reference, echoed by a provider that signs nothing (Xiaomi): it names
    -- the delivery and its device under Herald's HMAC. NULL: delivery_id says.
    reference   text
);
