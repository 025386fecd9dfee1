-- Writes to a metastore's rows that bump no version and change its Delta commits or history (the
-- history's purge, a purge request: store/db.py count_side_write) count here, so that a move between home
-- databases (store/homes.py) copies those tables again instead of comparing every row under its fence.
ALTER TABLE metastores ADD COLUMN side_writes bigint NOT NULL DEFAULT 0;
