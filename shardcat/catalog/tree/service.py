"""The catalog tree's types a shard serves, each through its own module's service, and nowhere else.

Every type is the generic type service (crud.py `TypeService`) with its own hooks, in its own
module: catalogs and schemas (containers.py), tables and staging tables (tables.py, where a
table's rules are composed), volumes, functions and registered models. `CatalogService` names
them once, below, and answers for a type by its name (`create(caller, "table", body)`), as the
routes (serving/app.py) and the other protocols (the Delta API, the Iceberg REST catalog,
lineage) call them. A new type is its module and one line in `types`. The metastore-level
types (credentials, external locations, shares, recipients, providers) are the same generic
service, served by storage.py and sharing.py.
"""

from __future__ import annotations

from typing import Awaitable

from ...auth import Caller
from ...entities.asset import Asset
from ...entities.types import CATALOG, SCHEMA
from ...shards.shard import Shard
from .containers import Containers
from .crud import TypeService
from .foreign import federation_of
from .functions import Functions
from .models import RegisteredModels
from .tables import StagingTables, Tables
from .volumes import Volumes


class CatalogService:
    """Catalogs, schemas, tables, staging tables, volumes, functions and registered models. Each
    method hands back its type's own coroutine (no frame of its own on the read path)."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.store = shard.store
        self.tables = Tables(shard)
        self.types: dict[str, TypeService] = {
            "catalog": Containers(shard, CATALOG),
            "schema": Containers(shard, SCHEMA),
            "table": self.tables,
            "staging_table": StagingTables(shard),
            "volume": Volumes(shard),
            "function": Functions(shard),
            "registered_model": RegisteredModels(shard),
        }
        # Foreign catalogs' schemas and tables are made fresh before they are read (foreign.py).
        self.federation = federation_of(shard)     # one per shard, shared by every API
        self.types["schema"].foreign = self.tables.foreign = self.federation

    def find(self, caller: Caller, type_name: str, full_name: str) -> Awaitable[Asset]:
        """The asset, if the caller may read it."""
        return self.types[type_name].find(caller, full_name)

    def get(self, caller: Caller, type_name: str, full_name: str) -> Awaitable[dict]:
        return self.types[type_name].get(caller, full_name)

    def list(self, caller: Caller, type_name: str, parent_full: str | None,
             max_results=None, page_token: str | None = None) -> Awaitable[dict]:
        return self.types[type_name].list(caller, parent_full, max_results, page_token)

    def list_page(self, caller: Caller, type_name: str, parent_full: str | None, max_results=None,
                  page_token: str | None = None) -> Awaitable[tuple[list[Asset], str | None]]:
        """A page of the children the caller may see, and the next page's token (None: the last page)."""
        return self.types[type_name].list_page(caller, parent_full, max_results, page_token)

    def create(self, caller: Caller, type_name: str, body: dict) -> Awaitable[dict]:
        return self.types[type_name].create(caller, body)

    def update(self, caller: Caller, type_name: str, full_name: str, body: dict) -> Awaitable[dict]:
        return self.types[type_name].update(caller, full_name, body)

    def delete(self, caller: Caller, type_name: str, full_name: str, force: bool = False) -> Awaitable[None]:
        return self.types[type_name].delete(caller, full_name, force)

    def create_staging_table(self, caller: Caller, body: dict) -> Awaitable[dict]:
        return self.types["staging_table"].create_staging_table(caller, body)

    def table_summaries(self, caller: Caller, body: dict) -> Awaitable[dict]:
        return self.tables.table_summaries(caller, body)
