"""What the catalog offers over its types: versions and snapshots, tags and ABAC policies, search and
path queries, batched resolve, lineage, change events, shares, samples, access requests and
temporary credentials. Imports from tree/, never from protocols/."""
