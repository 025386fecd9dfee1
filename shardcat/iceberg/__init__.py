"""Iceberg for the Iceberg REST catalog (catalog/protocols/iceberg_rest.py): metadata files through pyiceberg (metadata.py), and
which catalog rows are Iceberg tables, whose metadata pointer only that catalog moves (tables.py)."""
