-- A provider's limit one daemon met, for every daemon: Huawei's traffic control, Xiaomi's rate
-- and daily quota, and the like. A daemon that meets one pauses what it holds back until the
-- provider said (or its documented reset), and keeps it here; the others read it before they
-- send (at most once a second each), so that the fleet waits together instead of being refused
-- in turn, as FCM's quota does (herald.fcm_quotas). What a pause holds back is its provider's
-- choice (`account`: an app's Huawei client, an app at Xiaomi; `part`: all its sends, or those
-- of one message class); a row past its end holds nothing back, and the next pause of the same
-- part replaces it.
CREATE TABLE herald.provider_pauses (
    provider     text NOT NULL REFERENCES herald.providers,
    account      text NOT NULL,
    part         text NOT NULL DEFAULT '',
    paused_until timestamptz NOT NULL,
    reason       text NOT NULL,
    paused_at    timestamptz NOT NULL,
    PRIMARY KEY (provider, account, part)
);
COMMENT ON TABLE herald.provider_pauses IS 'Limits a provider set on what an app sends (traffic control, a rate, a daily quota), as the daemon that met one wrote it: every daemon holds back what it covers until paused_until.';
COMMENT ON COLUMN herald.provider_pauses.provider IS 'The provider (herald.providers).';
COMMENT ON COLUMN herald.provider_pauses.account IS 'Whose sends it holds back, as its provider names them: "app shop", "client 106892911".';
COMMENT ON COLUMN herald.provider_pauses.part IS 'Which of them: '''' all, or a message class (''marketing'') when the limit is that class''s.';
COMMENT ON COLUMN herald.provider_pauses.paused_until IS 'Until when: the provider''s Retry-After, the reset of its quota, or its route''s own pause.';
COMMENT ON COLUMN herald.provider_pauses.reason IS 'The provider''s answer that set it.';
COMMENT ON COLUMN herald.provider_pauses.paused_at IS 'When the daemon met it.';
REVOKE ALL ON herald.provider_pauses FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT, UPDATE ON herald.provider_pauses TO herald_daemon;
-- An operator may lift a pause (DELETE): the daemons see it within a second.
GRANT SELECT, DELETE ON herald.provider_pauses TO herald_operator;
