"""Table maintenance as Ray tasks: what runs on the cluster's nodes, never on a shard's serving loop.

The catalog (catalog/features/maintenance.py) decides what to run, for which table and when (policies,
commit signals, schedule) and records every run; this package is the work itself, one job per module
(delta_jobs.py, iceberg_jobs.py), the policy rules (policy.py) and the Ray side (runner.py). A job
that changes a catalog-managed table commits through the catalog, as any writer does.
"""
