-- Search (shards/search.py) looks for words inside full names and comments. A trigram index on
-- both (pg_trgm, in PostgreSQL's contrib) finds them without reading every asset of the
-- metastore. Where pg_trgm is not installed the index is left out and search scans instead.
-- The indexed expression is store/db.py's SEARCH_TEXT: the two must stay the same.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): search scans every asset of a metastore', SQLERRM;
END $$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX assets_search ON assets
            USING gin ((lower(full_name) || ' ' || lower(coalesce(info->>'comment', ''))) gin_trgm_ops);
    END IF;
END $$;
