"""Which of the files an Iceberg table's metadata names lie outside the table. A writer chooses every path in
its manifest lists and manifests; the catalog reads them with its own rights (server-side scan planning), so
a path outside the table's location, or on a local file system one reached through a symbolic link below it,
is another's file and is not read. Pure checks over canonical URLs (entities/urls.py), and the local disk's
links for file://.
"""

from __future__ import annotations

import os

from ..entities.urls import InvalidUrl, is_within, local_path, normalize_url


def outside(location: str, paths) -> list[str]:
    """Those of `paths` (as their writer spelled them) that are not strictly inside the table at `location`."""
    root = normalize_url(location)
    out = []
    for path in paths:
        try:
            url = normalize_url(path)
            inside = url != root and is_within(url, root) and not (
                root.startswith("file://") and _through_link(local_path(root), local_path(url)))
        except InvalidUrl:
            inside = False
        if not inside:
            out.append(path)
    return out


def _through_link(base: str, path: str) -> bool:
    """Whether local `path`, below `base`, is a symbolic link or lies below one (the table's own root may be)."""
    current = base
    for name in os.path.relpath(path, base).split(os.sep):
        current = os.path.join(current, name)
        if os.path.islink(current):
            return True
    return False
