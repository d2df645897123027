-- What the schema knows of a provider is data in the seam's tables, not a CHECK or a CASE that
-- names it (docs/architecture.md, "Adding a provider").
--
-- A device's subscription keys: the two CHECKs that named the web platform and UnifiedPush's
-- token kind become one that names neither. Which kinds are subscriptions is already data
-- (herald.token_kinds.endpoint_policy), and herald.register_device, the only writer of
-- devices beside Herald's own functions, parses a subscription of such a kind into its endpoint
-- and both keys. That a device of such a kind has its keys is now register_device's alone to
-- keep (the CHECKs refused a web or UnifiedPush device without them); a row written around it
-- without keys is claimed as a plain token, which the subscription's provider does not take, so
-- it waits with that reason and is never sent. NOT VALID: every row was written under the
-- CHECKs this replaces, which made the keys whole too, and validating would scan the devices
-- under the ALTER's lock.
ALTER TABLE herald.devices
    DROP CONSTRAINT "a web device has its subscription's keys",
    DROP CONSTRAINT "a UnifiedPush device has its keys",
    ADD CONSTRAINT "a device's subscription keys are whole" CHECK (
        (web_p256dh IS NULL AND web_auth IS NULL) OR (octet_length(web_p256dh) = 65 AND octet_length(web_auth) = 16))
        NOT VALID;

-- The token kind of a device registered without one, by the app's choice of transport for its
-- platform: herald.register_device read 'apns' for iOS from its own CASE.
CREATE TABLE herald.transport_token_kinds (
    platform text NOT NULL REFERENCES herald.platforms,
    transport text NOT NULL,
    token_kind text NOT NULL REFERENCES herald.token_kinds,
    PRIMARY KEY (platform, transport),
    -- An app chooses a transport for iOS alone (herald.apps.ios_transport), which
    -- register_device reads for every platform.
    CHECK (platform = 'ios')
);
COMMENT ON TABLE herald.transport_token_kinds IS 'The token kind a device of a platform holds when registered without one, by the transport its app chose for that platform (herald.apps.ios_transport); no row: the platform''s default_token_kind. Rows belong to the migrations.';
COMMENT ON COLUMN herald.transport_token_kinds.platform IS 'The device''s platform (herald.platforms).';
COMMENT ON COLUMN herald.transport_token_kinds.transport IS 'The app''s transport for the platform, as herald.apps.ios_transport holds it.';
COMMENT ON COLUMN herald.transport_token_kinds.token_kind IS 'The token kind such a device holds (herald.token_kinds).';
REVOKE ALL ON herald.transport_token_kinds FROM PUBLIC, herald_producer, herald_operator, herald_daemon;
GRANT SELECT ON herald.transport_token_kinds TO herald_operator, herald_daemon;
INSERT INTO herald.transport_token_kinds (platform, transport, token_kind) VALUES ('ios', 'apns', 'apns_device_token');
COMMENT ON COLUMN herald.platforms.default_token_kind IS 'The token kind a device holds when registered without one, unless its app''s transport for the platform says another (herald.transport_token_kinds).';
COMMENT ON COLUMN herald.devices.token_kind IS 'What push_token is, one of herald.token_kinds; with a delivery''s payload kind it picks the route (herald.route_rules). Given to herald.register_device, or else the platform''s default (herald.platforms, herald.transport_token_kinds).';

-- Why a push type may be tried no longer than its max_ttl, as ingest's refusal says it: ingest
-- named VoIP and Push to Talk in a CASE.
ALTER TABLE herald.push_types ADD COLUMN max_ttl_reason text;
UPDATE herald.push_types SET max_ttl_reason = CASE WHEN push_type IN ('voip', 'pushtotalk')
                                                   THEN 'a late one must not ring or play'
                                                   ELSE 'APNs keeps nothing longer' END;
ALTER TABLE herald.push_types ALTER COLUMN max_ttl_reason SET NOT NULL;
COMMENT ON COLUMN herald.push_types.max_ttl_reason IS 'Why it may be tried no longer than max_ttl, as ingest''s refusal of a longer ttl or expires_at says it.';
