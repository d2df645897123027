-- The demo's producer: everything an app backend does, in plain SQL.
-- scripts/run-local.sh runs it against the local database before starting herald.

-- An app, and its Firebase project (its credentials: GOOGLE_APPLICATION_CREDENTIALS).
INSERT INTO herald.apps (app_id) VALUES ('demo-shop') ON CONFLICT (app_id) DO NOTHING;
INSERT INTO herald.app_fcm (app_id, project_id) VALUES ('demo-shop', 'herald-demo') ON CONFLICT (app_id) DO NOTHING;

-- Alice has a phone and a tablet; Bob has a phone he logged out of. Their iOS apps talk to FCM
-- (the token is an FCM registration token).
SELECT * FROM herald.register_device('demo-shop', 'alice-pixel', 'android', 'demo-token-alice-pixel', 'alice');
SELECT * FROM herald.register_device('demo-shop', 'alice-ipad', 'ios', 'demo-token-alice-ipad', 'alice',
                                     token_kind => 'registration_token');
SELECT * FROM herald.register_device('demo-shop', 'bob-iphone', 'ios', 'demo-token-bob-iphone', 'bob',
                                     token_kind => 'registration_token');
SELECT herald.unregister_device('demo-shop', 'bob-iphone');

-- The shop's newer iOS app talks to Apple directly, with the team's APNs key: Alice's iPhone
-- registers its APNs device token (hex). (run-local.sh makes the key at the emulator.)
\if :{?apns_key_file}
INSERT INTO herald.app_apns (app_id, environment, bundle_id, team_id, key_id, key_file)
VALUES ('demo-shop', 'development', 'com.example.demoshop', 'DEMOTEAM01', 'DEMOKEY001', :'apns_key_file')
ON CONFLICT (app_id) DO UPDATE SET key_file = excluded.key_file;
UPDATE herald.apps SET ios_transport = 'apns' WHERE app_id = 'demo-shop';
SELECT * FROM herald.register_device('demo-shop', 'alice-iphone', 'ios',
                                     'a11ce0000000000000000000000000000000000000000000000000000000f00d', 'alice');
-- Alice's iPhone also takes calls through the app (PushKit), has a widget that updates by push
-- (WidgetKit, iOS 26), shares her location with her courier (a Location Push Service
-- Extension) and talks on a Push to Talk channel: each framework's token is registered beside
-- the device, and each push goes to it straight from APNs.
SELECT * FROM herald.register_push_type_token('demo-shop', 'alice-iphone', 'voip',
                                              'ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11ca11');
SELECT * FROM herald.register_push_type_token('demo-shop', 'alice-iphone', 'widgets',
                                              '3d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e7d6e');
SELECT * FROM herald.register_push_type_token('demo-shop', 'alice-iphone', 'location',
                                              '10ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e0010ca7e00');
SELECT * FROM herald.register_push_type_token('demo-shop', 'alice-iphone', 'pushtotalk',
                                              '7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c7a1c');
SELECT herald.send_push('demo-shop', 'voip', user_ref => 'alice', data => '{"call_id": "c-7", "caller": "Support"}',
                        idempotency_key => 'call-c-7');
SELECT herald.send_push('demo-shop', 'widgets', user_ref => 'alice', idempotency_key => 'order-42-widget');
SELECT herald.send_push('demo-shop', 'location', user_ref => 'alice', priority => 'normal', ttl => '10 minutes',
                        data => '{"query": "courier-eta"}', idempotency_key => 'order-42-where');
SELECT herald.send_push('demo-shop', 'pushtotalk', user_ref => 'alice', data => '{"speaker": "Courier"}',
                        idempotency_key => 'order-42-talk');
-- A broadcast channel for a match (iOS 18): the channels worker makes it at APNs, and one
-- request reaches every Live Activity subscribed to it (the broadcast waits for the channel).
SELECT herald.create_channel('demo-shop', 'match-7');
SELECT herald.broadcast_activity('demo-shop', 'match-7', '{"home": 1, "away": 0}', title => 'Goal!',
                                 idempotency_key => 'match-7-goal-1');
\endif

-- Alice also allowed notifications in her browser: the app sends to it with its VAPID key, and
-- the browser's PushSubscription.toJSON() is the token. (run-local.sh makes both.)
\if :{?subscription}
-- The emulator's push service runs on this machine, so the app allows it by name and address
-- (browsers of a real app name only the browsers' push services, the default).
INSERT INTO herald.app_webpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
VALUES ('demo-shop', :'vapid_key_file', 'mailto:push@demo-shop.example', '{localhost,127.0.0.1}', true)
ON CONFLICT (app_id) DO UPDATE SET vapid_key_file = excluded.vapid_key_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-browser', 'web', :'subscription', 'alice');
\endif

-- Alice's second phone is a Huawei without Google's services: it receives through Huawei Push
-- Kit, with the app's client id and secret from AppGallery Connect. (run-local.sh registers
-- them at the emulator.)
\if :{?hms_secret_file}
INSERT INTO herald.app_hms (app_id, client_id, client_secret_file)
VALUES ('demo-shop', '106892911', :'hms_secret_file')
ON CONFLICT (app_id) DO UPDATE SET client_secret_file = excluded.client_secret_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-mate', 'android', 'ANDdemo0token0alice0mate0x1', 'alice',
                                     token_kind => 'hms_token');
\endif

-- Alice's third phone is a Xiaomi bought in China: it receives through Xiaomi Mi Push, with the
-- app's AppSecret, its package name and the channels it registered with Xiaomi for its service
-- (private) and marketing (public) notifications. (run-local.sh registers them at the emulator.)
\if :{?xiaomi_secret_file}
INSERT INTO herald.app_xiaomi (app_id, app_secret_file, package_name, service_channel_id, marketing_channel_id)
VALUES ('demo-shop', :'xiaomi_secret_file', 'com.example.demoshop', 'orders', 'deals')
ON CONFLICT (app_id) DO UPDATE SET app_secret_file = excluded.app_secret_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-redmi', 'android', 'd0demo0regid0alice0redmi0x1', 'alice',
                                     token_kind => 'xiaomi_regid');
\endif

-- Alice's fourth phone is an Honor: it receives through Honor Push, as the app's OAuth 2.0 client.
-- (run-local.sh registers it at the emulator.)
\if :{?honor_secret_file}
INSERT INTO herald.app_honor (app_id, honor_app_id, client_id, client_secret_file)
VALUES ('demo-shop', '104405925', 'demo-honor-client', :'honor_secret_file')
ON CONFLICT (app_id) DO UPDATE SET client_secret_file = excluded.client_secret_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-magic', 'android', 'BAEAdemo0token0alice0magic0x1', 'alice',
                                     token_kind => 'honor_token');
\endif

-- Alice's fifth phone is a OnePlus bought in China: it receives through OPPO Push, with the app's
-- AppKey, its MasterSecret and the channels it registered with OPPO (a private one for its service
-- notifications). OPPO has no silent message: the silent sync below fails on it, saying so.
\if :{?oppo_secret_file}
INSERT INTO herald.app_oppo (app_id, app_key, master_secret_file, service_channel_id, marketing_channel_id, service_category)
VALUES ('demo-shop', 'demooppokey42', :'oppo_secret_file', 'orders', 'deals', 'ORDER')
ON CONFLICT (app_id) DO UPDATE SET master_secret_file = excluded.master_secret_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-oneplus', 'android', 'CN_5f3d9c0a4b7e2d18a6c1f0e9b8d7a6c5', 'alice',
                                     token_kind => 'oppo_token');
\endif

-- And her sixth a vivo: vivo Push, with the app's AppID, AppKey and AppSecret. vivo shows
-- marketing only by day in China, so a marketing notification to it waits for 7:00 there.
\if :{?vivo_secret_file}
INSERT INTO herald.app_vivo (app_id, vivo_app_id, app_key, app_secret_file, service_category)
VALUES ('demo-shop', '105469478', 'demo-vivo-key', :'vivo_secret_file', 'ORDER')
ON CONFLICT (app_id) DO UPDATE SET app_secret_file = excluded.app_secret_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-vivo', 'android', '15638535410301000000001', 'alice',
                                     token_kind => 'vivo_token');
\endif

-- Alice's tablet runs HarmonyOS NEXT: Push Kit shows its notifications, sent with the project's
-- service-account key file. (run-local.sh makes one and registers its public key at the
-- emulator.)
\if :{?harmony_account_file}
INSERT INTO herald.app_harmony (app_id, service_account_file, category)
VALUES ('demo-shop', :'harmony_account_file', 'EXPRESS')
ON CONFLICT (app_id) DO UPDATE SET service_account_file = excluded.service_account_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-matepad', 'harmony', 'MAMzLgdemo0token0alice0matepad', 'alice');
\endif

-- Alice's old phone runs without Google's services and receives through a UnifiedPush
-- distributor (the emulator stands in for it).
\if :{?distributor}
INSERT INTO herald.app_unifiedpush (app_id, vapid_key_file, vapid_subject, hosts, private_addresses)
VALUES ('demo-shop', :'vapid_key_file', 'mailto:push@demo-shop.example', '{127.0.0.1}', true)
ON CONFLICT (app_id) DO UPDATE SET vapid_key_file = excluded.vapid_key_file;
SELECT * FROM herald.register_device('demo-shop', 'alice-fairphone', 'android', :'distributor', 'alice',
                                     token_kind => 'unifiedpush');
\endif

-- Notifications, each in the producer's own transaction.
BEGIN;
-- An order's progress is a service message (message_class): the phone makers' push services
-- show it as one, in the app's service category or channel, rather than as marketing.
SELECT herald.send('demo-shop', user_ref => 'alice', title => 'Your order shipped',
                   body => 'Parcel 42 is on its way', data => '{"order_id": 42}',
                   deep_link => 'demoshop://orders/42', idempotency_key => 'order-42-shipped',
                   message_class => 'service');
COMMIT;
SELECT herald.send('demo-shop', user_ref => 'alice', silent => true, data => '{"sync": "rewards"}');
SELECT herald.send('demo-shop', topic => 'deals', title => 'Flash sale', body => 'Today only');
SELECT herald.send('demo-shop', user_ref => 'bob', title => 'Bob logged out, so this has nowhere to go');
SELECT herald.send('demo-shop', user_ref => 'alice', title => 'Reserved key', data => '{"from": "me"}');

-- Live Activities. Alice's iPad has the app's push-to-start token for its DeliveryAttributes
-- (ActivityKit, hex), so the backend can start an activity on it; and a ride activity the app
-- started itself registered its update token, so the backend can update it.
SELECT * FROM herald.register_activity_token('demo-shop', 'alice-ipad', repeat('5a', 32), 'DeliveryAttributes');
SELECT * FROM herald.register_activity_token('demo-shop', 'alice-ipad', repeat('7e', 32), 'RideAttributes', 'ride-7');
SELECT herald.start_activity('demo-shop', 'order-42', 'DeliveryAttributes', '{"orderNumber": 42}',
                             '{"status": "packing"}', 'Order 42', body => 'We are packing it', user_ref => 'alice',
                             idempotency_key => 'order-42-activity-start');
SELECT herald.update_activity('demo-shop', 'ride-7', '{"driver": "Sam", "minutesAway": 4}',
                              idempotency_key => 'ride-7-update-1');
