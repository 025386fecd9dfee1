-- Search by tag (catalog/search.py, `tag:key` and `tag:key=value`) finds the assets holding a tag
-- key in their own tags (info->'tags', catalog/tags.py) through this index instead of reading
-- every asset of the metastore. Store.search's `?` on the same expression uses it.
CREATE INDEX IF NOT EXISTS assets_tags ON assets USING gin ((info->'tags'));
