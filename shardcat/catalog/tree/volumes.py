"""Volumes: the storage rule a volume adds to the generic type service (crud.py).

A MANAGED volume gets its storage from the catalog, under the nearest storage root
(`<root>/volumes/<volume_id>`), like a managed table; an EXTERNAL volume names its own
`storage_location`, which must not overlap any other asset's storage (one asset per path) and,
once the metastore has external locations, must lie inside one of them.
"""

from __future__ import annotations

import dataclasses

from ...entities.urls import join_url
from ...entities.asset import Asset
from ...errors import invalid
from ...store.writes import WriteTx
from ...shards.locations import require_external_location
from .assets import check_free, checked_storage_url, managed_root
from .crud import TypeService
from ...entities.types import VOLUME
from ...shards.shard import MetastoreState, Shard

VOLUME_TYPES = ("MANAGED", "EXTERNAL")


class Volumes(TypeService):
    def __init__(self, shard: Shard):
        super().__init__(shard, VOLUME)

    async def on_create(self, tx, state, asset, schema, flags):
        return await create_volume(tx, state, asset, schema)


async def create_volume(tx: WriteTx, state: MetastoreState, asset: Asset, schema: Asset) -> Asset:
    info = dict(asset.info)
    volume_type = info["volume_type"]
    if volume_type not in VOLUME_TYPES:
        raise invalid(f"Unknown volume_type '{volume_type}'; expected one of {', '.join(VOLUME_TYPES)}.")
    location = info.pop("storage_location", None)
    if volume_type == "MANAGED":
        if location is not None:
            raise invalid("A MANAGED volume's storage is allocated by the catalog: leave storage_location out.")
        location = join_url(await managed_root(tx, state, schema), "volumes", asset.id)
        check_free(state, location, "storage_location", inside_managed=True)
    else:
        if not location:
            raise invalid("Missing required field 'storage_location' to create an EXTERNAL volume.")
        location = checked_storage_url(location, "storage_location")
        check_free(state, location, "storage_location", inside_managed=False)
        # Inside an external location, once the metastore has any (shards/locations.py).
        require_external_location(state, location, "storage_location of the volume")
    info["storage_location"] = location
    return dataclasses.replace(asset, info=info, storage_path=location)

