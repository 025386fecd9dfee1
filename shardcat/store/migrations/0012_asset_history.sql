-- Versioned metadata (docs/versions.md). `assets` holds only the present; every state a write
-- replaces or deletes is kept here, in the same transaction, with the versions it was current:
-- written_at <= v < replaced_at. A read at version v is the union of the live rows written at or
-- before v and the history rows current at v. Rows older than the metastore's retention window
-- are purged by a bounded background task (catalog/versions.py), except those a snapshot pins.
CREATE TABLE asset_history (
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    id            uuid NOT NULL,
    type          text NOT NULL,
    namespace     text NOT NULL,
    parent_id     uuid NOT NULL,
    name          text COLLATE "C" NOT NULL,
    full_name     text COLLATE "C" NOT NULL,
    storage_path  text,
    info          jsonb NOT NULL,
    written_at    bigint NOT NULL,
    replaced_at   bigint NOT NULL,
    dropped       boolean NOT NULL DEFAULT false,   -- the write at replaced_at deleted it
    grants        jsonb,                            -- dropped: the grants it held then, for undrop
    PRIMARY KEY (id, written_at)
);
CREATE INDEX asset_history_names ON asset_history (metastore_id, namespace, full_name, written_at);
CREATE INDEX asset_history_children ON asset_history (parent_id, namespace, name);
CREATE INDEX asset_history_age ON asset_history (metastore_id, replaced_at);
CREATE INDEX asset_history_dropped ON asset_history (metastore_id, replaced_at) WHERE dropped;

-- Who made each write (the caller's name), for an asset's history.
ALTER TABLE change_log ADD COLUMN principal text;

-- Per metastore: history for versions below `purged_below` is gone (except snapshots' versions).
CREATE TABLE history_horizons (
    metastore_id  uuid PRIMARY KEY REFERENCES metastores(id) ON DELETE CASCADE,
    purged_below  bigint NOT NULL
);

-- Named snapshots: a catalog or schema pinned at a metastore version, kept past the retention
-- window until dropped (the purge keeps every history row current at a snapshot's version).
CREATE TABLE version_snapshots (
    metastore_id    uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    name            text NOT NULL,
    securable_type  text NOT NULL,
    securable_id    uuid NOT NULL,
    full_name       text NOT NULL,
    version         bigint NOT NULL,
    comment         text,
    created_by      text NOT NULL,
    created_at      bigint NOT NULL,
    PRIMARY KEY (metastore_id, name)
);

-- Shallow clones: a table whose Delta log references another table's files. The source's files
-- are not deleted (purge) while a clone references them.
CREATE TABLE table_clones (
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    clone_id      uuid NOT NULL,
    source_id     uuid NOT NULL,
    source_path   text NOT NULL,
    PRIMARY KEY (clone_id, source_id)
);
CREATE INDEX table_clones_source ON table_clones (source_id);
