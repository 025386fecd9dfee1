"""The Iceberg REST catalog (docs/iceberg.md), one job per module: names.py and errors.py (names as clients
spell them, Iceberg's error model), base.py (what the operations share), namespaces.py (config and
namespaces), tables.py, commits.py, views.py, foreign_tables.py (writes in foreign catalogs: passed through
or refused), catalog.py (them composed), http.py (the handlers)."""

from .catalog import IcebergCatalog
from .errors import IcebergError

__all__ = ["IcebergCatalog", "IcebergError"]
