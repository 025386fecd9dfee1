-- Identity: what SCIM says of a principal, the trusted-engine mark, and group membership.
-- Principals, groups and tokens are account state: plain transactions, no metastore version.

ALTER TABLE principals
    ADD COLUMN display_name    text,
    ADD COLUMN emails          jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN active          boolean NOT NULL DEFAULT true,
    ADD COLUMN external_id     text,
    ADD COLUMN trusted_engine  boolean NOT NULL DEFAULT false,   -- may receive row filters and column masks
    ADD COLUMN updated_at      bigint;

-- A group's direct members (users, service principals, groups). Membership is closed
-- transitively when a caller is authenticated (a recursive query); cycles are refused on insert.
CREATE TABLE group_members (
    group_id   bigint NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
    member_id  bigint NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, member_id),
    CHECK (group_id <> member_id)
);
CREATE INDEX group_members_member ON group_members (member_id);

CREATE INDEX tokens_principal ON tokens (principal_id);
