"""Catalog operations: the one generic type service (crud.py) with each type's hooks in its own module,
the catalog tree's types listed in service.py; and each API's operations (storage, sharing, models,
functions, lineage, search, resolve, Delta commits)."""
