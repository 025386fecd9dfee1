-- Idempotency-Key of the Iceberg REST catalog's mutations (store/idempotency.py): a key is the caller's own
-- (scoped by metastore and principal, so one user's key never answers another's request), names the
-- operation and target it was first sent to, and holds that request's final answer once it has one (status
-- NULL while it runs). Kept in the directory's database, which every shard of the metastore reaches, so a
-- retry served by another shard after a failover finds it.
CREATE TABLE iceberg_idempotency (
    metastore_id  uuid NOT NULL,
    principal_id  bigint NOT NULL,
    key           uuid NOT NULL,
    operation     text NOT NULL,
    status        integer,
    body          jsonb,
    created_at    bigint NOT NULL,
    PRIMARY KEY (metastore_id, principal_id, key)
);
CREATE INDEX iceberg_idempotency_created ON iceberg_idempotency (created_at);
