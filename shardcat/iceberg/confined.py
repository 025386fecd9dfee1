"""Whether what an Iceberg table's metadata names is the table's own. A writer chooses every path in its
manifest lists and manifests, and can overwrite the metadata file itself in storage (its credentials reach
the table's whole prefix); the catalog reads them with its own rights (scan planning, the maintenance jobs
through its load), so a metadata file naming another location than its table's, and a path outside the
table's location (on a local file system, one reached through a symbolic link below it), are another's and
are not read. Pure checks over canonical URLs (entities/urls.py), and the local disk's links for file://.
"""

from __future__ import annotations

import os

from ..entities.urls import InvalidUrl, is_within, local_path, normalize_url
from ..errors import CatalogError


def own_location(metadata, table_location: str | None) -> None:
    """Refuse a table's metadata whose location is not the table's (`table_location`, canonical): commits never
    move a table, so the file was changed in storage. Not quoted: it is the writer's."""
    if table_location is None:          # (a foreign table whose storage is not served: its metadata is not read)
        return
    try:
        same = normalize_url(metadata.location) == table_location
    except InvalidUrl:
        same = False
    if not same:
        raise CatalogError("FAILED_PRECONDITION", "The table's metadata file names another location than the "
                                                  "table's: it was changed in storage, not by a commit, and is "
                                                  "not read.")


def outside(location: str, paths) -> list[str]:
    """Those of `paths` (as their writer spelled them) that are not strictly inside the table at `location`."""
    root = normalize_url(location)
    out = []
    for path in paths:
        try:
            url = normalize_url(path)
            inside = url != root and is_within(url, root) and not (
                root.startswith("file://") and through_link(local_path(root), local_path(url)))
        except InvalidUrl:
            inside = False
        if not inside:
            out.append(path)
    return out


def through_link(base: str, path: str) -> bool:
    """Whether local `path`, below `base`, is a symbolic link or lies below one (the table's own root may be):
    its file is not the table's (a link to a folder would reach another table's files through it)."""
    current = base
    for name in os.path.relpath(path, base).split(os.sep):
        current = os.path.join(current, name)
        if os.path.islink(current):
            return True
    return False
