-- Writes to a metastore's rows that bump no version (the history's purge, snapshots, a purge
-- request: Store.unversioned) count here, so that a move between home databases (store/homes.py)
-- knows to copy those tables again instead of comparing every row under its fence.
ALTER TABLE metastores ADD COLUMN side_writes bigint NOT NULL DEFAULT 0;
