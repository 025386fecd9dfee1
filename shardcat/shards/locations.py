"""Which external location governs a storage path: the rule external tables and volumes follow.

A metastore with no external location is in local mode: external paths may be anywhere
(the one-asset-per-path rule still holds). Once it has one, every external table or
volume path must lie inside an external location. Pure functions over a shard's
MetastoreState; no I/O.
"""

from __future__ import annotations

from ..errors import CatalogError, invalid
from .shard import MetastoreState, PathOwner


def location_of(state: MetastoreState, url: str) -> PathOwner | None:
    """The external location holding `url` (at or above it), or None."""
    hit = state.locations.owner(url)
    return hit[1] if hit is not None else None


def outside_locations(url: str, what: str) -> CatalogError:
    """The answer for a url no external location holds (and for one only locations the caller may not see hold)."""
    return invalid(f"The {what} '{url}' is not inside any external location of this metastore; "
                   "create an external location that covers it first.")


def require_external_location(state: MetastoreState, url: str, what: str) -> PathOwner | None:
    """The external location an external table's or volume's `url` lies in; an error if the metastore
    has external locations and none holds `url`; None in local mode (no external location at all).

    Volumes call this too: `require_external_location(state, location, "storage_location of the volume")`.
    """
    if len(state.locations) == 0:
        return None
    owner = location_of(state, url)
    if owner is None:
        raise outside_locations(url, what)
    # Whether the creator may use that location (CREATE EXTERNAL TABLE / VOLUME) comes with governance.
    return owner
