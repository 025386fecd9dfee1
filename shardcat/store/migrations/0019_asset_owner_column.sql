-- A securable's owner as a column of its own (issue #48): a cold owner's first governed request waits for
-- the privilege index, whose load reads every asset's owner. Read as info->>'owner', that took each row's
-- whole JSON body out of TOAST and parsed it (46 s for a million tables); kept by PostgreSQL on every
-- write, it is a narrow column. Adding it rewrites the table once.
ALTER TABLE assets ADD COLUMN owner text GENERATED ALWAYS AS (info->>'owner') STORED;
