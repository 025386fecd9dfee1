-- Ratified commits of catalog-managed Delta tables (shardcat/delta/commits.py has the rules).
-- One row per (table, version), written in the same metastore write (version bump and
-- change-log row) as any table-metadata change the commit carries. A commit is either
-- staged (file_name under _delta_log/_staged_commits/) or inline (content kept here).
-- Rows stay after publishing, marked `published`, so a late replay of an old commit is
-- still recognised by its file name.
CREATE TABLE delta_commits (
    table_id                     uuid NOT NULL,
    version                      bigint NOT NULL,
    metastore_id                 uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    file_name                    text NOT NULL,
    file_size                    bigint NOT NULL,
    file_modification_timestamp  bigint NOT NULL,
    commit_timestamp             bigint NOT NULL,
    content                      text,
    published                    boolean NOT NULL DEFAULT false,
    ratified_at                  bigint NOT NULL,
    PRIMARY KEY (table_id, version)
);
