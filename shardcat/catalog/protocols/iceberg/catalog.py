"""The Iceberg REST catalog: Iceberg's REST OpenAPI over a metastore's catalogs, schemas and tables.

Served at `/api/2.1/unity-catalog/iceberg/v1/...` and `/api/2.1/unity-catalog/iceberg-rest/v1/...`.
The warehouse is a catalog's name: `GET /v1/config?warehouse=<catalog>` answers the prefix
`catalogs/<catalog>`, under which a one-level namespace is a schema of that catalog. Without a
warehouse the routes have no prefix and namespaces have two levels: catalog, then schema.

Iceberg tables are shardcat tables (`data_source_format` ICEBERG, MANAGED under the schema's or
catalog's managed storage, or EXTERNAL where `location` says), governed by the same grants and
the one-asset-per-path rule; Iceberg views are VIEW rows. A row's `metadata_location` property is
its current metadata file. A commit writes the new metadata file, then makes one metastore write
(`Shard.write`: serialized per metastore, version-conditioned) that moves the pointer if it still
is the one the commit was based on; if it moved meanwhile, the commit is redone on the newer
metadata inside that write, and refused (409 CommitFailedException) when its requirements no
longer hold. A multi-table transaction moves all its pointers in that one write, or none.
Metadata work is pyiceberg's (shardcat/iceberg/metadata.py). Errors answer in Iceberg's error model.
"""

from __future__ import annotations

from .commits import Commits
from .foreign_tables import ForeignTables
from .functions import Functions
from .namespaces import Namespaces
from .planning import Planning
from .signing import Signing
from .tables import Tables
from .views import Views


class IcebergCatalog(ForeignTables, Namespaces, Tables, Commits, Views, Planning, Signing, Functions):
    """The Iceberg REST catalog over one shard: each group of operations in its own module (ForeignTables
    first: it decides the writes in foreign catalogs, and hands the rest on)."""
