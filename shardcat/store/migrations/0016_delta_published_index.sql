-- A table's latest published Delta version is a backward walk of this index's few newest entries
-- (store/db.py _DELTA_HEAD). Without it the walk filters the primary key on `published`, and a
-- plan PostgreSQL caches while the table is small (a bitmap scan and sort of all the table's
-- commits) makes every later commit read the table's whole history.
CREATE INDEX delta_commits_published ON delta_commits (table_id, version) WHERE published;
