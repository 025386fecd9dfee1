-- Reads at a version (store/history.py) ask for the history rows current at v:
-- written_at <= v < replaced_at. Near the present few rows end after v; far back few begin
-- before v: an index on each end lets the planner take the narrower side (children and whole
-- metastore; a name or an id takes its latest state at or before v through its own index).
CREATE INDEX asset_history_children_ended ON asset_history (parent_id, namespace, replaced_at);
CREATE INDEX asset_history_children_began ON asset_history (parent_id, namespace, written_at);
CREATE INDEX asset_history_began ON asset_history (metastore_id, written_at);
DROP INDEX asset_history_children;
