-- The catalog's durable state. Every write to a metastore bumps metastores.version
-- in the same transaction and appends one change_log row for the new version.

CREATE TABLE metastores (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    version     bigint NOT NULL DEFAULT 0,
    info        jsonb NOT NULL
);

CREATE TABLE workspaces (
    workspace_id          bigint PRIMARY KEY,
    metastore_id          uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    default_catalog_name  text
);

CREATE TABLE principals (
    id                bigserial PRIMARY KEY,
    name              text NOT NULL UNIQUE,
    kind              text NOT NULL CHECK (kind IN ('user', 'group', 'service_principal')),
    is_account_admin  boolean NOT NULL DEFAULT false,
    created_at        bigint NOT NULL
);

CREATE TABLE tokens (
    id            bigserial PRIMARY KEY,
    principal_id  bigint NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
    token_hash    bytea NOT NULL UNIQUE,
    workspace_id  bigint NOT NULL,
    comment       text,
    created_at    bigint NOT NULL,
    expires_at    bigint,
    revoked_at    bigint
);

-- One row per securable inside a metastore, whatever its type. Names are unique
-- within (metastore, namespace): tables and views share the namespace 'table'.
CREATE TABLE assets (
    id            uuid PRIMARY KEY,
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    type          text NOT NULL,
    namespace     text NOT NULL,
    parent_id     uuid NOT NULL,
    name          text COLLATE "C" NOT NULL,    -- byte order: pages and caches agree on it
    full_name     text COLLATE "C" NOT NULL,
    storage_path  text,
    info          jsonb NOT NULL,
    written_at    bigint NOT NULL,
    UNIQUE (metastore_id, namespace, full_name)
);
CREATE INDEX assets_children ON assets (parent_id, namespace, name);
CREATE INDEX assets_paths ON assets (metastore_id, storage_path) WHERE storage_path IS NOT NULL;

CREATE TABLE change_log (
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    version       bigint NOT NULL,
    changed       uuid[] NOT NULL,
    parents       uuid[] NOT NULL,
    at            bigint NOT NULL,
    PRIMARY KEY (metastore_id, version)
);
