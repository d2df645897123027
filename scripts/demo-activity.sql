-- The demo's second step, once herald has sent the first (scripts/run-local.sh runs it a few
-- seconds after starting herald): the push-to-start reached Alice's iPad, ActivityKit started
-- the order's Live Activity, and the app registered its update token; the backend updates the
-- activity and, later, ends it.
SELECT * FROM herald.register_activity_token('demo-shop', 'alice-ipad', repeat('0d', 32), 'DeliveryAttributes',
                                             'order-42');
SELECT herald.update_activity('demo-shop', 'order-42', '{"status": "on its way", "eta": 12}',
                              idempotency_key => 'order-42-activity-update');
SELECT pg_sleep(1.5);  -- the delivery goes on; an end at once would supersede the update still waiting
SELECT herald.end_activity('demo-shop', 'order-42', '{"status": "delivered"}',
                           dismiss_at => now() + interval '1 hour', idempotency_key => 'order-42-activity-end');
