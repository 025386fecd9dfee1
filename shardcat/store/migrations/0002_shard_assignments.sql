-- Which shard the router last assigned each metastore to. Best effort: two shards may
-- serve one metastore for a while; the metastore version keeps that safe, and a shard
-- that sees a foreign write checks here whether it is still the assigned owner.
CREATE TABLE shard_assignments (
    metastore_id  uuid PRIMARY KEY REFERENCES metastores(id) ON DELETE CASCADE,
    shard         text NOT NULL,
    assigned_at   bigint NOT NULL
);
