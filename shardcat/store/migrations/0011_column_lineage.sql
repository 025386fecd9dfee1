-- Column lineage (catalog/openlineage.py, from OpenLineage's columnLineage facet): one row per
-- (source column, target column) of every reported write. Like `lineage`: metadata about assets,
-- no version bump, no foreign keys, the names kept so that it outlives renames and drops.
CREATE TABLE column_lineage (
    id             bigserial PRIMARY KEY,
    metastore_id   uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    source_id      uuid NOT NULL,
    source_type    text NOT NULL,
    source_name    text NOT NULL,
    source_column  text NOT NULL,
    target_id      uuid NOT NULL,
    target_name    text NOT NULL,
    target_column  text NOT NULL,
    job            text,
    principal      text NOT NULL,
    at             bigint NOT NULL           -- ms since the epoch
);
CREATE INDEX column_lineage_target ON column_lineage (target_id, target_column);
CREATE INDEX column_lineage_source ON column_lineage (source_id, source_column);
