-- Which credentials a provider has accepted a send with, known to every daemon. Huawei's Push
-- Kit answers a token of another app's credentials as it answers a dead token (80300007, and
-- HarmonyOS's `noRight`), so such an answer proves the token dead only once the credentials are
-- known to be the app's. A daemon kept that in its memory alone: after a restart, or on a second
-- daemon, the first dead token it met raised a false configuration problem and held every
-- Huawei phone of the app for a probe's minute.
-- Kept per app: credentials accepted for one app prove nothing of another app's row that names
-- them by mistake.
CREATE TABLE herald.accepted_credentials (
    app_id text NOT NULL REFERENCES herald.apps ON UPDATE CASCADE ON DELETE CASCADE,
    provider text NOT NULL REFERENCES herald.providers,
    account text NOT NULL,
    first_accepted_at timestamptz NOT NULL,
    PRIMARY KEY (app_id, provider, account)
);
COMMENT ON TABLE herald.accepted_credentials IS 'Credentials a provider has accepted an app''s send with, one row each, written by the daemon that saw it first: a refusal that means a dead token or another app''s credentials alike (Huawei''s 80300007) is read as a dead token only for credentials here.';
COMMENT ON COLUMN herald.accepted_credentials.app_id IS 'The app whose send was accepted (herald.apps).';
COMMENT ON COLUMN herald.accepted_credentials.provider IS 'The provider (herald.providers).';
COMMENT ON COLUMN herald.accepted_credentials.account IS 'The credentials as the provider names them: Huawei''s OAuth 2.0 client id, a HarmonyOS service account''s project and key id.';
COMMENT ON COLUMN herald.accepted_credentials.first_accepted_at IS 'When a daemon first saw the provider accept a send made with them.';
REVOKE ALL ON herald.accepted_credentials FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT, INSERT ON herald.accepted_credentials TO herald_daemon;
GRANT SELECT, DELETE ON herald.accepted_credentials TO herald_operator;
