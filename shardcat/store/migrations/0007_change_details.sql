-- What each metastore write did to each securable it touched, for the change feed
-- (GET /shardcat/changes, shardcat/shards/changes.py): a JSON list of
-- {"id", "change", "type", "full_name"}, "change" one of CREATE, UPDATE, DELETE, PERMISSIONS,
-- DELTA_COMMIT, DELTA_PUBLISH. NULL on rows written before this migration.
ALTER TABLE change_log ADD COLUMN details jsonb;
