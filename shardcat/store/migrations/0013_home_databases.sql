-- Home databases (docs/cluster.md "Home databases"): a metastore's state lives in one of several
-- PostgreSQL servers, its home; the first configured server also holds the account directory.
-- Every server gets every table (the same migrations run on each); which rows it holds says
-- what it is: the directory's `metastore_homes` names every metastore's home, a home's
-- `metastores` row is that metastore's version (the one writes are conditioned on).

-- This server's name among the configured ones, written at its first start: a server given
-- another name later (servers listed in another order) is refused rather than misread.
CREATE TABLE database_identity (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    name        text NOT NULL,
    named_at    bigint NOT NULL
);

-- The directory: every metastore, its account-unique name, and the server that is its home.
-- '' is this server itself; the first start that knows this server's name fills it in.
CREATE TABLE metastore_homes (
    metastore_id  uuid PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    home          text NOT NULL,
    homed_at      bigint NOT NULL DEFAULT 0
);
INSERT INTO metastore_homes (metastore_id, name, home) SELECT id, name, '' FROM metastores;

-- Workspaces and shard assignments are account state: they name metastores of any home.
ALTER TABLE workspaces DROP CONSTRAINT workspaces_metastore_id_fkey,
    ADD CONSTRAINT workspaces_metastore_id_fkey FOREIGN KEY (metastore_id)
        REFERENCES metastore_homes(metastore_id) ON DELETE CASCADE;
ALTER TABLE shard_assignments DROP CONSTRAINT shard_assignments_metastore_id_fkey,
    ADD CONSTRAINT shard_assignments_metastore_id_fkey FOREIGN KEY (metastore_id)
        REFERENCES metastore_homes(metastore_id) ON DELETE CASCADE;

-- A fenced metastore takes no write here: it is being moved to another server (the copy there
-- is fenced too until the directory names it the home). A write finding the fence waits for the
-- directory to switch and goes to the new home, with the same expected version.
ALTER TABLE metastores ADD COLUMN fenced boolean NOT NULL DEFAULT false;
