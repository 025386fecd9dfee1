"""Catalog operations, in three rooms, each importing only from the rooms below it:

- protocols/: wire APIs over the catalog (Iceberg REST, the UC Delta API and Delta commits, Delta
  Sharing, OpenLineage, transactions);
- features/: what the catalog offers over its types (versions, tags, search, resolve, lineage, ...);
- tree/: the catalog tree's types (the generic type service crud.py, one module per type) and their shared rules.

Delta's split: shardcat/delta/ holds the Delta protocol's own rules and log format as pure code;
the operations that serve them over HTTP live in protocols/ (delta_api.py, delta_commits.py)."""
