-- Grants: one row per (securable, principal, privilege). Metastore state: every change is a
-- metastore write (version bump + change-log row naming the securable). A grant on an asset
-- goes with the asset (asset_id cascades); a grant on the metastore itself has asset_id NULL.
CREATE TABLE grants (
    metastore_id  uuid NOT NULL REFERENCES metastores(id) ON DELETE CASCADE,
    securable_id  uuid NOT NULL,
    asset_id      uuid REFERENCES assets(id) ON DELETE CASCADE,
    principal     text NOT NULL,
    privilege     text NOT NULL,
    granted_by    text NOT NULL,
    granted_at    bigint NOT NULL,
    PRIMARY KEY (securable_id, principal, privilege)
);
CREATE INDEX grants_metastore ON grants (metastore_id);
