-- herald.check_web_push_endpoint stayed a release after migration 035 replaced it with
-- herald.check_push_endpoint, for daemons that still called it; nothing does now. Dropping it
-- leaves only what migrations/functions/ defines, which migrations/baseline/ (the schema a new
-- database starts from, as after this migration) relies on.
DROP FUNCTION IF EXISTS herald.check_web_push_endpoint(text, herald.apps);
