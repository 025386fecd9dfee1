"""Catalog operations: the generic asset service and each type's rules, composed in service.py;
and each API's operations (storage, sharing, models, functions, lineage, search, resolve, Delta commits)."""
