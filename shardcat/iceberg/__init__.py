"""Iceberg format work for the Iceberg REST catalog (shards/iceberg_rest.py): metadata files through pyiceberg."""
