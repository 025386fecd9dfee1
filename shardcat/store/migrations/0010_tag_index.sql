-- Search by tag (catalog/search.py, `tag:key` and `tag:key=value`) narrows the assets through
-- this index instead of reading every asset of the metastore: `info->'tag_index'` lists every
-- `key` and `key=value` of an asset's own tags and of its columns' (catalog/tags.py keeps it),
-- and Store.search's `?` on the same expression uses it before the exact test.
CREATE INDEX IF NOT EXISTS assets_tags ON assets USING gin ((info->'tag_index'));
