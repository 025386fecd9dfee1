"""Catalog-managed Delta tables: the catalog's commit rules (commits.py), the Delta log
format (log.py) and a Python Delta client that commits through the catalog (client.py)."""
