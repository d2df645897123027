-- herald.prune walks the notifications by id, a batch at a time, from a cursor the pruner keeps:
-- the old one ordered the whole table by created_at (no index) and probed every row's
-- deliveries, so that each call read every notification, the backlog first. Its new signature
-- (a cursor in, the cursor and whether the pass is done out) replaces the old one, which a
-- daemon older than this migration still calls: it logs "pruning failed" and prunes nothing
-- until it is upgraded.
DROP FUNCTION herald.prune(interval, integer);

-- Processed reports are pruned in order of processing, through this index, a batch per statement
-- (herald.prune_reports), instead of a scan of the whole table at every call.
CREATE INDEX delivery_reports_processed ON herald.delivery_reports (processed_at) WHERE processed_at IS NOT NULL;
