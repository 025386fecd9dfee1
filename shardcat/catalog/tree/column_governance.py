"""The one place a table's columns are replaced: every writer that changes them (updateTable, a
Delta commit's metadata, the UC Delta API's set-columns and set-partition-columns, an Iceberg
commit or transaction, an Iceberg view's replace) goes through `keep_column_governance`.

A column's governance is its tags (catalog/features/tags.py; ABAC policies mask and filter by them,
governance/abac.py) and its mask (governance/row_filters.py). A column that stays keeps both: the
same column by name (in any case) or, where the writer has field ids (Iceberg), by field id, so a
renamed column keeps them and the names in the row filter and masks follow it. What a change
drops (the tags and mask of a column that goes; a mask updateTable leaves out) needs what the tag
and mask APIs need for it: per tag `require_tag_removal` (APPLY TAG; ASSIGN on a governed key's
policy), for a mask the table's update right (ownership or MANAGE), else PERMISSION_DENIED,
raised before anything is written.
"""

from __future__ import annotations

import dataclasses

from ...entities.asset import Asset
from ...entities.columns import carry_governance
from ...errors import CatalogError
from ...governance.authorize import denied
from ...governance.tag_policies import require_tag_removal, tag_policies


async def keep_column_governance(store, authz, old: Asset, new: Asset, *, renamed: dict[str, str] | None = None,
                                 masks_given: bool = False) -> Asset:
    """`new` (the table `old` with its columns replaced by a writer) with the governance of the
    columns that stay, if the caller may drop what goes; `renamed`: old name -> new name by field
    id; `masks_given`: the new columns say their masks (updateTable), else the old ones stay."""
    if new.info.get("columns") is old.info.get("columns"):
        return new
    # updateTable's row filter is its own (checked with the rest of it); a writer's is the table's
    row_filter = None if masks_given else new.info.get("row_filter")
    kept = carry_governance(old.info.get("columns") or [], new.info.get("columns") or [], row_filter,
                            renamed=renamed, masks_given=masks_given)
    if kept.lost_masks:
        decision = authz.decide("table", "update", old)     # what changing a mask through updateTable needs
        if not decision.allowed:
            raise _refused(f"Column '{kept.lost_masks[0]}' of table '{old.full_name}' has a mask", decision.reason)
    if kept.lost_tags:
        policies = await tag_policies(store, old.metastore_id)
        for column, key, value in kept.lost_tags:
            try:
                require_tag_removal(authz, "table", old, key, value, policies)
            except CatalogError as e:
                if e.code != "PERMISSION_DENIED":
                    raise
                raise _refused(f"Column '{column}' of table '{old.full_name}' carries tag '{key}'", e.message) from None
    info = {**new.info, "columns": kept.columns}
    if row_filter:
        info["row_filter"] = kept.row_filter
    return dataclasses.replace(new, info=info)


def _refused(what: str, reason: str) -> CatalogError:
    return denied(f"{what}, which removing the column (or its mask) removes too: {reason[0].lower()}{reason[1:]}")
