-- Lineage (shardcat/shards/lineage.py): one row per (source, target) of every write an engine
-- reported: the job read `source` (a table or volume) and wrote `target` (a table). Metadata
-- about assets, not their state: no metastore version bump, no foreign keys to assets, and the
-- names they had are kept, so lineage outlives renames and drops.
CREATE TABLE lineage (
    id            bigserial PRIMARY KEY,
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    source_id     uuid NOT NULL,
    source_type   text NOT NULL,
    source_name   text NOT NULL,
    target_id     uuid NOT NULL,
    target_name   text NOT NULL,
    job           text,
    principal     text NOT NULL,
    at            bigint NOT NULL           -- ms since the epoch
);
CREATE INDEX lineage_target ON lineage (target_id);
CREATE INDEX lineage_source ON lineage (source_id);
