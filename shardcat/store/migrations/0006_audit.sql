-- The audit log (shardcat/governance/audit.py): one row per request a shard or the router
-- served, and per access decision recorded on its own (e.g. each item of a batched resolve).
-- Account state, not metastore state: no version bump, no foreign keys, so rows outlive
-- the metastores and principals they name. `allowed` is false when the caller was refused
-- (UNAUTHENTICATED or PERMISSION_DENIED); status, error_code and message say what happened.
CREATE TABLE audit_log (
    id               bigserial PRIMARY KEY,
    at               bigint NOT NULL,          -- ms since the epoch, when the request arrived
    request_id       text,
    principal        text,                     -- NULL: no valid token
    workspace_id     bigint,
    metastore_id     uuid,
    action           text NOT NULL,            -- getTable, createTable, generateTemporaryTableCredentials, ...
    route            text,                     -- the HTTP method and route: GET /tables/{full_name}
    securable_type   text,
    securable_name   text,
    securable_id     text,
    allowed          boolean NOT NULL,
    status           integer,                  -- HTTP status; NULL for a decision recorded inside a request
    error_code       text,
    message          text
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_principal ON audit_log (principal, id);
CREATE INDEX audit_log_metastore ON audit_log (metastore_id, id);
