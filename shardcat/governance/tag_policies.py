"""Governed tags: the rules of a tag's key and value, and of tag policies (a governed key's allowed
values, and who holds ASSIGN on it). Decisions only; the tag API (catalog/features/tags.py) and every
writer that replaces a table's columns (catalog/tree/column_governance.py) apply them.
"""

from __future__ import annotations

import unicodedata

from ..auth import Caller
from ..entities.asset import Asset
from ..entities.names import check_principal
from ..errors import CatalogError, invalid
from .authorize import denied

MAX_KEY_CHARS = 255
MAX_VALUE_CHARS = 1000
MAX_POLICY_VALUES = 1000
_KEY_FORBIDDEN = set(",.:/-=")     # these separate keys from values in search (`tag:key=value`) and names


def check_key(key, where: str = "tag_key") -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise invalid(f"Field '{where}' must be a string of 1 to {MAX_KEY_CHARS} characters.")
    key = unicodedata.normalize("NFC", key)
    if key != key.strip() or _KEY_FORBIDDEN & set(key) or any(unicodedata.category(c)[0] == "C" for c in key):
        raise invalid(f"Tag key '{key:.60}' may not start or end with spaces nor hold control characters "
                      "or any of , . : / - =")
    return key


def check_value(value, where: str = "tag_value") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_VALUE_CHARS:
        raise invalid(f"Field '{where}' must be a string of at most {MAX_VALUE_CHARS} characters.")
    value = unicodedata.normalize("NFC", value)
    if any(unicodedata.category(c)[0] == "C" for c in value):
        raise invalid(f"Field '{where}' may not hold control characters.")
    return value


def check_policy(body: dict, key: str | None = None) -> dict:
    if not isinstance(body, dict):
        raise invalid("The body must be a tag policy object.")
    key = check_key(body.get("tag_key") if key is None else key)
    out = {"tag_key": key}
    description = body.get("description")
    if description is not None:
        if not isinstance(description, str) or len(description) > 10_000:
            raise invalid("Field 'description' must be a string of at most 10000 characters.")
        out["description"] = description
    values = body.get("values")
    if values is not None:
        if not isinstance(values, list) or len(values) > MAX_POLICY_VALUES:
            raise invalid(f"Field 'values' must be a list of at most {MAX_POLICY_VALUES} {{\"name\": ...}}.")
        names = []
        for i, v in enumerate(values):
            if not isinstance(v, dict):
                raise invalid(f"values[{i}] must be an object {{\"name\": ...}}.")
            name = check_value(v.get("name"), f"values[{i}].name")
            if name is None:
                raise invalid(f"values[{i}].name is required.")
            if name not in names:
                names.append(name)
        out["values"] = [{"name": n} for n in names]
    assigners = body.get("assign_principals")
    if assigners is not None:
        if not isinstance(assigners, list) or len(assigners) > 1000:
            raise invalid("Field 'assign_principals' must be a list of at most 1000 principal names.")
        out["assign_principals"] = sorted({check_principal(p, "assign_principals") for p in assigners})
    return out


def policy_allows(policy: dict | None, caller: Caller, admin: bool, key: str, value) -> None:
    """Refuse a governed tag's value outside its allowed values, or a caller without ASSIGN on it."""
    if policy is None:
        return
    allowed = [v["name"] for v in policy.get("values") or []]
    if value is not None and allowed and value not in allowed:
        raise invalid(f"Tag '{key}' is governed: its value must be one of {', '.join(allowed)}; got '{value:.100}'.")
    if value is None and allowed:
        raise invalid(f"Tag '{key}' is governed: it needs a value, one of {', '.join(allowed)}.")
    if not admin and not (set(policy.get("assign_principals") or ()) & caller.principals):
        raise denied(f"Principal '{caller.name}' may not assign the governed tag '{key}': that needs ASSIGN on "
                     "its tag policy.")


def require_tag_removal(authz, kind: str, asset: Asset, key: str, value, policies: dict,
                        missing: CatalogError | None = None) -> None:
    """What removing tag `key` (of `value`) from an asset or one of its columns needs, by the tag
    API or by a writer that replaces a table's columns (catalog/tree/column_governance.py): APPLY TAG on
    it (or administering it), and ASSIGN on the key's tag policy if the key is governed."""
    authz.require_or_missing(kind, "apply_tag", asset, missing)
    policy = policies.get(key)
    policy_allows(policy, authz.caller, bool(authz.admin), key, None if policy is None else value)


async def tag_policies(store, metastore_id: str) -> dict:
    """The metastore's tag policies by key (kept in its record)."""
    meta = await store.get_metastore(metastore_id)
    return meta.info.get("tag_policies") or {}
