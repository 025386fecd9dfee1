"""ABAC policies: row filters and column masks attached by tag, on a catalog, schema or table,
to every table under it (now and later) whose tags match, for named principals, with exceptions.

A policy is Databricks' `PolicyInfo`: `on_securable_type` / `on_securable_fullname` (where it is
attached), `policy_type` (POLICY_TYPE_ROW_FILTER or POLICY_TYPE_COLUMN_MASK), `for_securable_type`
(TABLE), `to_principals` / `except_principals`, `when_condition` (on the table's tags),
`match_columns` ([{condition, alias}]: the columns whose tags match the condition bind the alias),
and `row_filter` {function_name, using: [{alias}]} or `column_mask` {function_name, on_column:
alias, using: [{alias}]}. Conditions are `hasTag('k')` and `hasTagValue('k', 'v')`, joined by AND
or OR (AND binds tighter), or `true`.

This module is the evaluation (pure, no I/O) and the per-shard cache of a metastore's policies
(kept in the metastore's record; the follower below drops the cache whenever that record
changes). catalog/features/policies.py serves the API. The effective filter and masks of a table, for one
caller, are what trusted engines receive with the table (resolve, getTable, shardcat.spark) and
why untrusted engines are refused its data (authorize.py `data_decision`). Precedence: a policy's
row filter replaces the table's own, a policy's mask replaces the column's own; two policies that
give one table a row filter, or one column a mask, for the same caller refuse that caller the
data (fail closed), as Databricks refuses the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..entities.asset import name_today
from ..errors import invalid

ROW_FILTER, COLUMN_MASK = "POLICY_TYPE_ROW_FILTER", "POLICY_TYPE_COLUMN_MASK"
ON_TYPES = ("CATALOG", "SCHEMA", "TABLE")
EVERYONE = "account users"      # Databricks' group of every user

_CALL = re.compile(r"\s*(hasTagValue|hasTag)\s*\(\s*'([^']*)'\s*(?:,\s*'([^']*)'\s*)?\)\s*", re.IGNORECASE)
_JOIN = re.compile(r"\s*(AND|OR)\s+", re.IGNORECASE)


def parse_condition(text, where: str) -> list[list[tuple[str, str | None]]]:
    """A condition as OR of ANDs of (key, value or None); [[]] for `true` or nothing."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "true")):
        return [[]]
    if not isinstance(text, str) or len(text) > 2000:
        raise invalid(f"{where} must be a condition of at most 2000 characters.")
    ors, ands, pos = [], [], 0
    while True:
        m = _CALL.match(text, pos)
        if m is None:
            raise invalid(f"{where}: expected hasTag('key') or hasTagValue('key', 'value') at "
                          f"'{text[pos:pos + 40]}'; conditions join them with AND and OR.")
        fn, key, value = m.group(1).lower(), m.group(2), m.group(3)
        if (fn == "hastagvalue") != (value is not None) or not key:
            raise invalid(f"{where}: hasTag takes a key, hasTagValue a key and a value.")
        ands.append((key, value))
        pos = m.end()
        if pos == len(text):
            return ors + [ands]
        j = _JOIN.match(text, pos)
        if j is None:
            raise invalid(f"{where}: expected AND or OR at '{text[pos:pos + 40]}'.")
        if j.group(1).upper() == "OR":
            ors.append(ands)
            ands = []
        pos = j.end()


def holds(condition: list[list[tuple[str, str | None]]], tags: dict | None) -> bool:
    tags = tags or {}
    return any(all(k in tags and (v is None or tags[k] == v) for k, v in ands) for ands in condition)


@dataclass
class Policy:
    """A stored policy, parsed once for evaluation."""
    info: dict
    when: list = field(default_factory=list)
    matches: dict = field(default_factory=dict)      # alias -> condition

    @classmethod
    def of(cls, info: dict) -> "Policy":
        return cls(info, parse_condition(info.get("when_condition"), "when_condition"),
                   {m["alias"]: parse_condition(m.get("condition"), "match_columns") for m in
                    info.get("match_columns") or []})

    def covers(self, full_name: str) -> bool:
        on = self.info["on_securable_fullname"].lower()
        return full_name == on or full_name.startswith(on + ".")

    def for_caller(self, principals: frozenset[str]) -> bool:
        to = set(self.info.get("to_principals") or ())
        if not (EVERYONE in to or to & principals):
            return False
        return not (set(self.info.get("except_principals") or ()) & principals)


@dataclass
class Effective:
    """What the policies give one table for one caller."""
    row_filter: dict | None = None
    masks: dict = field(default_factory=dict)        # column name (lower) -> mask spec
    policies: list = field(default_factory=list)     # the names of the policies that apply
    ids: list = field(default_factory=list)          # and their ids
    conflict: str | None = None

    def __bool__(self) -> bool:
        return bool(self.row_filter or self.masks or self.conflict)


def _bind(policy: Policy, columns: list[dict]) -> dict[str, list[str]]:
    return {alias: [c["name"] for c in columns if holds(cond, c.get("tags"))] for alias, cond in policy.matches.items()}


def effective(asset, policies: list[Policy], principals: frozenset[str], *, everyone: bool = False,
              name: str | None = None) -> Effective:
    """The row filter and masks the policies give `asset` (a table) for a caller with `principals`
    (`everyone`: regardless of principals: does any policy touch the table at all); `name`: were
    the table named so (its clone's name), else by its name today."""
    out = Effective()
    if asset.type != "table" or not policies:
        return out
    tags, columns = asset.info.get("tags"), asset.info.get("columns") or []
    name = name or name_today(asset) or asset.full_name      # a state read at a past version: by today's name
    masks: dict[str, list[tuple[str, dict]]] = {}
    filters: list[tuple[str, dict]] = []
    for p in policies:
        info = p.info
        if not p.covers(name) or not (everyone or p.for_caller(principals)):
            continue
        if not holds(p.when, tags):
            continue
        bound = _bind(p, columns)
        spec = info.get("row_filter") if info["policy_type"] == ROW_FILTER else info.get("column_mask")
        using_aliases = [u["alias"] for u in spec.get("using") or []]
        if any(not bound.get(a) for a in using_aliases):
            continue                        # the table lacks a column the policy needs: it does not apply
        if any(len(bound[a]) > 1 for a in using_aliases):
            out.conflict = f"policy '{info['name']}' matches several columns for one argument"
            continue
        using = [bound[a][0] for a in using_aliases]
        if info["policy_type"] == ROW_FILTER:
            filters.append((info["name"], {"function_name": spec["function_name"], "input_column_names": using}))
        else:
            targets = bound.get(spec["on_column"]) or []
            for col in targets:
                masks.setdefault(col.lower(), []).append(
                    (info["name"], {"function_name": spec["function_name"], "using_column_names": using}))
            if not targets:
                continue
        out.policies.append(info["name"])
        out.ids.append(info.get("id"))
    if len(filters) > 1:
        out.conflict = f"policies {', '.join(repr(n) for n, _ in filters)} each give it a row filter"
    elif filters:
        out.row_filter = filters[0][1]
    for col, found in masks.items():
        if len(found) > 1:
            out.conflict = f"policies {', '.join(repr(n) for n, _ in found)} each mask column '{col}'"
        else:
            out.masks[col] = found[0][1]
    return out


def apply(out: dict, eff: Effective) -> dict:
    """A rendered table with the policies' filter and masks in place of its own (see precedence)."""
    if not eff:
        return out
    out = dict(out)
    if eff.row_filter:
        out["row_filter"] = eff.row_filter
    if eff.masks and out.get("columns"):
        out["columns"] = [{**c, "mask": eff.masks[c["name"].lower()]} if c["name"].lower() in eff.masks else c
                          for c in out["columns"]]
    out["effective_policies"] = eff.policies
    return out


# ---- a metastore's policies, cached per shard ---------------------------------------------------


class PolicyFollower:
    """Drops a metastore's cached policies whenever its record (which holds them) changes."""

    def applied(self, state, tx) -> None:
        if state.id in tx.changed:
            state.policies = None

    async def reconciled(self, state, changes) -> None:
        if state.id in changes.touched:
            state.policies = None

    def rebuilt(self, state, version: int) -> None:
        state.policies = None


POLICIES = PolicyFollower()


def parse_all(stored: dict | None) -> list[Policy]:
    return [Policy.of(p) for p in (stored or {}).values()]


def current_policies(shard, metastore_id: str, min_version: int = 0) -> list[Policy] | None:
    """`policies_of` without waiting, when the shard holds them at a version new enough (every
    cached read after the first); None when `policies_of` must be awaited."""
    state = shard.states.get(metastore_id)
    if state is None or state.policies is None or state.version < min_version:
        return None
    return state.policies


async def policies_of(shard, metastore_id: str, min_version: int = 0) -> list[Policy]:
    """The metastore's policies at the shard's version: cached on the state until its record changes."""
    shard.follow(POLICIES)
    state = await shard.state(metastore_id, min_version, paths=False)   # policies need no path index
    cached = state.policies
    if cached is not None:
        return cached
    version = state.version
    meta = await shard.store.get_metastore(metastore_id)
    found = parse_all(meta.info.get("abac_policies") if meta else None)
    if state.version == version:          # no write in between: the cache is current
        state.policies = found
    return found
