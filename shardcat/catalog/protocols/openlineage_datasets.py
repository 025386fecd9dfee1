"""Which catalog asset an OpenLineage dataset names (the naming rules of catalog/protocols/openlineage.py).

The OpenLineage naming spec names a dataset by a namespace and a name. Here a dataset is:

- **a catalog table by name**: a namespace that is not a URL (`shardcat`, `etl`, ...) and a name
  `catalog.schema.table`; or the catalog service's own URL, `scheme://host:port` (the scheme, host
  and port the event was posted to, a default port spelled or not), and that name. Another
  service's URL names another catalog's table: nothing here.
- **a storage path**: namespace `file`, `s3://bucket`, `gs://bucket`, `abfss://container@host`, ...,
  joined with the name; the asset owning the path maps (the caller of `ref` decides, as access by path).
- with a **`symlinks` facet** (as Spark's integration sends a table it read or wrote by path): each
  identifier (`namespace`, `name`, `type`) is another name of the same dataset, by the rules above.
  A symlink only ever confirms: the dataset's path must belong to the table it names, else it maps
  by its path alone (or not at all); a dataset with no path of its own (a namespace nothing here
  reads) may be named by its symlink, which claims no more than naming the table directly would.

Pure functions; no state, no I/O.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ...entities.names import full_name_key
from ...entities.urls import InvalidUrl, normalize_url
from ...errors import CatalogError

STORAGE_NAMESPACES = ("file", "s3", "s3a", "s3n", "gs", "abfss", "abfs")
_WEB = {"http": 80, "https": 443}
MAX_SYMLINKS = 10         # a dataset's symlinks read (Spark's integration sends one or two)


def origin(url: str) -> str | None:
    """`scheme://host:port` of an http(s) URL (lower case, the default port spelled), None for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _WEB or not parts.hostname or parts.username or parts.password:
        return None
    return f"{scheme}://{parts.hostname.lower()}:{port or _WEB[scheme]}"


def _table_key(name: str):
    try:
        return "name", ("table", full_name_key(name, 3, "table"))
    except CatalogError:     # not a catalog name: a dataset of some other system
        return None


def dataset_ref(namespace: str, name: str, own: frozenset[str] = frozenset()):
    """('name', key) for a catalog name, ('path', url) for a storage path, or None. `own`: the origins
    (`origin`) the catalog answers at."""
    scheme = namespace.split("://", 1)[0].lower() if "://" in namespace else None
    if scheme in _WEB:
        if origin(namespace) not in own or urlsplit(namespace).path.strip("/"):
            return None          # another service (or a path under one): another catalog's dataset
        return _table_key(name)
    if scheme is not None or namespace in STORAGE_NAMESPACES:
        base = namespace if scheme is not None else f"{namespace}://"
        url = base.rstrip("/") + "/" + name.lstrip("/") if name else base
        if namespace == "file":
            url = "file://" + ("/" + name.lstrip("/"))
        try:
            return "path", normalize_url(url)
        except InvalidUrl:
            return None
    return _table_key(name)


def symlinks(dataset: dict) -> list[tuple[str, str]]:
    """The (namespace, name) identifiers of a dataset's `symlinks` facet; malformed ones are left out."""
    facets = dataset.get("facets") if isinstance(dataset, dict) else None
    facet = facets.get("symlinks") if isinstance(facets, dict) else None
    identifiers = facet.get("identifiers") if isinstance(facet, dict) else None
    if not isinstance(identifiers, list):
        return []
    return [(i["namespace"], i["name"]) for i in identifiers[:MAX_SYMLINKS]
            if isinstance(i, dict) and isinstance(i.get("namespace"), str) and isinstance(i.get("name"), str)]
