"""Who may do what: the authorization entry points the rest of shardcat calls.

`await authorizer(shard, caller)` gives an `Authz` over the metastore's privilege index
(governance/index.py keeps one per metastore in each shard, current with the shard's
version); its checks are then pure and fast, so services call them inside their write
transactions, against the asset the write already read. A refusal is
CatalogError("PERMISSION_DENIED", <what is missing, on which securable>). Account admins
and metastore admins (the metastore's owner, a user or a group) pass every check.

The rules are data (governance/privileges.py): for each (securable type, operation) which
privilege, on the securable or an ancestor, plus USE CATALOG / USE SCHEMA on the catalogs
and schemas above it.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from pyroaring import BitMap

from ..auth import Caller
from ..cache.privilege_index import MANAGE, PrivilegeIndex
from ..entities.asset import Asset
from ..entities.foreign import connection_of, is_mirrored
from ..shards.session import past_read
from ..store.protocol import CatalogStore
from ..errors import CatalogError
from . import abac
from . import privileges as P
from . import system_catalog
from .index import request_index

_USE = {"catalog": P.USE_CATALOG, "schema": P.USE_SCHEMA}
_LABEL = {"registered_model": "registered model", "external_location": "external location"}


def label(kind: str) -> str:
    return _LABEL.get(kind, kind)


def is_metastore_admin(caller: Caller, metastore) -> bool:
    """Whether the caller (or a group it is in) owns the metastore: a Metastore record, its info, or the owner."""
    owner = metastore
    if hasattr(metastore, "info"):
        owner = metastore.info.get("owner")
    elif isinstance(metastore, dict):
        owner = metastore.get("owner")
    return owner is not None and owner in caller.principals


async def is_admin_now(store: CatalogStore, principal: str, metastore) -> bool:
    """Whether `principal` is, as the store says now, an active account admin or an admin of
    `metastore` (its owner, or in the group owning it): for work done later in a principal's name
    (webhook deliveries), which no token of its own re-authenticates."""
    principals = store.principals
    info = await principals.get_by_name(principal)
    if info is None or not info.active:
        return False
    if info.is_account_admin:
        return True
    groups = {m.group_name for m in (await principals.memberships([info.id]))[info.id]}
    return metastore.info.get("owner") in groups | {principal}


def denied(message: str) -> CatalogError:
    return CatalogError("PERMISSION_DENIED", message)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    how: dict | None = None       # allowed: {"source": "admin"|"owner"|"grant", ...}
    reason: str | None = None     # denied: what is missing

    def json(self) -> dict:
        # `how` copied: an admin's decision is one shared object (_ADMIN_DECISIONS)
        return {"allowed": True, "how": dict(self.how or {})} if self.allowed else \
            {"allowed": False, "reason": self.reason}


# An admin's every decision, made once: a Decision per Authz cost more than the rest of a cached read's
# authorization (a frozen dataclass and its dict, for every request of an admin).
_ADMIN_DECISIONS = {kind: Decision(True, {"source": "admin", "as": kind}) for kind in ("account admin",
                                                                                    "metastore admin")}


class Authz:
    """One caller's view of one metastore's privileges (index None: an account admin)."""

    def __init__(self, caller: Caller, index: PrivilegeIndex | None, principals: frozenset[str] | None = None,
                 is_account_admin: bool | None = None, subject: str | None = None):
        """`principals`, `is_account_admin`, `subject`: ask about someone else (the authorization API)."""
        self.caller = caller
        self.index = index
        self.principals = caller.principals if principals is None else principals
        self.subject = subject or caller.name
        account_admin = caller.is_account_admin if is_account_admin is None else is_account_admin
        if account_admin:
            self.admin = "account admin"
        elif index is not None and index.root_owner in self.principals:
            self.admin = "metastore admin"
        else:
            self.admin = None
        # An admin's every decision is this one (batched resolve asks once per item).
        self._admin_decision = _ADMIN_DECISIONS[self.admin] if self.admin else None
        self.policies: list = []     # the metastore's ABAC policies (abac.py), set by `authorizer`

    def effective(self, asset: Asset) -> abac.Effective:
        """The row filter and column masks ABAC policies give `asset` for this caller."""
        if not self.policies or asset.type != "table":
            return abac.Effective()
        return abac.effective(asset, self.policies, self.principals)

    def governed(self, asset: Asset) -> Asset:
        """The asset with the filter and masks ABAC policies give it for this caller in its own place
        (what resolve expands dependencies from: the policies' functions are dependencies too)."""
        eff = self.effective(asset)
        if not eff or eff.conflict:
            return asset
        return dataclasses.replace(asset, info=abac.apply(asset.info, eff))

    def present_table(self, out: dict, asset: Asset) -> dict:
        """A rendered table as this caller may see it: ABAC policies in place, for trusted engines only."""
        eff = self.effective(asset)
        if eff and self.caller.trusted_engine:
            out = abac.apply(out, eff)
        return present_table(self.caller, out)

    # ---- the securable's place in the index ---------------------------------------

    def _n(self, asset: Asset | None) -> int:
        """The index number of an asset (None: the metastore); an asset newer than the index joins it."""
        if asset is None:
            return 0
        n = self.index.find(asset.id)
        if n is None or not self.index.known(n):
            self.index.put(asset.id, asset.parent_id, asset.type, asset.info.get("owner"), asset.full_name)
            n = self.index.find(asset.id)
        return n

    def node(self, asset: Asset | None) -> int:
        """The asset's number in the privilege index (0: the metastore), for answers that read the index."""
        return self._n(asset)

    def _where(self, n: int) -> str:
        if n == 0:
            return "the metastore"
        return f"{label(self.index.kind_of(n, 'securable'))} '{self.index.name_of(n, '?')}'"

    def _holder(self, n: int, privilege: str) -> str | None:
        """Which of the caller's principals holds `privilege` directly on securable n."""
        granted = self.index.grants.get(n, {})
        for p in sorted(self.principals, key=lambda p: p != self.subject):
            if any(g == privilege or (g == P.ALL_PRIVILEGES and privilege != MANAGE) for g in granted.get(p, ())):
                return p
        return None

    def _how(self, source: str, n: int, at: int, principal: str | None, privilege: str | None = None) -> dict:
        how = {"source": source, "securable_type": self.index.kind_of(at, "metastore").upper(),
               "full_name": self.index.name_of(at, self.index.root_id) if at else self.index.root_id,
               "inherited": at != n}
        if privilege:
            how["privilege"] = privilege
        if principal and principal != self.subject:
            how["via_group"] = principal
        return how

    # ---- the one generic check ------------------------------------------------------

    def _alternative(self, n: int, want: str) -> dict | None:
        """How the caller meets one alternative of a rule on securable n, or None."""
        ix, principals = self.index, self.principals
        if want == P.ADMINISTER:
            for m in ix.chain(n):
                owner = ix.owner_of(m)
                if owner in principals:
                    return self._how("owner", n, m, owner)
            at = ix.first_in_chain(n, ix.granted(principals, MANAGE))
            return None if at is None else self._how("grant", n, at, self._holder(at, MANAGE), MANAGE)
        if want == P.OWNER:
            owner = ix.owner_of(n)
            return self._how("owner", n, n, owner) if owner in principals else None
        if want == P.ANY:
            at = ix.first_in_chain(n, ix.with_any_grant(principals))
            if at is None:
                return None
            holder = next(p for p in sorted(self.principals, key=lambda p: p != self.subject)
                          if p in ix.grants.get(at, {}))
            return self._how("grant", n, at, holder, sorted(ix.grants[at][holder])[0])
        at = ix.first_in_chain(n, ix.granted(principals, want))
        return None if at is None else self._how("grant", n, at, self._holder(at, want), want)

    def _uses(self, containers: list[int]) -> str | None:
        """The first catalog or schema among `containers` the caller may not use, as a reason; else None."""
        ix = self.index
        owned = ix.owned_by(self.principals)
        for c in reversed(containers):          # catalog first, then schema
            privilege = _USE.get(ix.kind_of(c))
            if privilege is None:
                continue
            if ix.first_in_chain(c, owned) is None and ix.first_in_chain(c, ix.granted(self.principals, privilege)) \
                    is None:
                return f"{privilege} on {self._where(c)}"
        return None

    def decide(self, kind: str, op: str, asset: Asset | None, *, parent: Asset | None = None,
               rule: P.Rule | None = None) -> Decision:
        """May the caller do `op` on `asset` (of type `kind`)? For create, `asset` is None and `parent`
        the container it goes into (None: the metastore)."""
        locked = system_catalog.refusal(self.caller, op, asset, parent, bool(self.admin))
        if locked is not None:       # the system catalog's rules bind admins too
            return Decision(False, reason=locked)
        if self.admin:
            return self._admin_decision
        rule = rule or P.rule(kind, op)
        if op == "create":
            n, containers = None, self.index.chain(self._n(parent))
        else:
            n = self._n(asset)
            containers = self.index.chain(n)[1:]
        target = {"self": n, "parent": self._n(parent) if op == "create" else self.index.parent_of(n, 0),
                  "metastore": 0}[rule.target]
        if rule.use:
            missing = self._uses(containers)
            if missing is not None:
                return Decision(False, reason=f"{self._caller()} lacks {missing}.")
        for want in rule.any_of:
            how = self._alternative(target, want)
            if how is not None:
                return Decision(True, how)
        what = f"create a {label(kind)} in" if op == "create" else f"{_VERB.get(op, op)}"
        return Decision(False, reason=f"{self._caller()} may not {what} {self._where(target)}: that needs "
                                      f"{rule.names()}.")

    def _caller(self) -> str:
        return f"Principal '{self.subject}'"

    def require(self, kind: str, op: str, asset: Asset | None, *, parent: Asset | None = None) -> None:
        decision = self.decide(kind, op, asset, parent=parent)
        if not decision.allowed:
            raise denied(decision.reason)

    # ---- existence: an asset the caller may not see answers as a missing one ----------

    def sees(self, kind: str, asset: Asset) -> bool:
        """Whether the caller may know that `asset` exists: it may read it, a list would show it
        (a catalog or schema holding something the caller owns or has a grant on), or it holds a
        privilege on it itself; always with the right to use the catalogs and schemas above.
        Everywhere else the asset answers as if it did not exist (docs/security.md)."""
        if system_catalog.trusted_only(asset) and asset.type == "table" and not (self.admin or
                                                                                 self.caller.trusted_engine):
            return False
        if self.admin or self.decide(kind, "read", asset).allowed:
            return True
        ix, n = self.index, self._n(asset)
        if self._uses(ix.chain(n)[1:]) is not None:
            return False
        if n in ix.with_any_grant(self.principals):
            return True
        return kind in ("catalog", "schema") and n in ix.above(ix.with_any_grant(self.principals) |
                                                               ix.owned_by(self.principals))

    def require_or_missing(self, kind: str, op: str, asset: Asset | None,
                           missing: CatalogError | Callable[[], CatalogError] | None, *,
                           parent: Asset | None = None) -> None:
        """`require`, except that a refusal on an asset (for a create: the container) the caller
        may not see raises `missing`: the very error a missing name gives, so refusals tell no
        one what exists. `missing` may be a function making it (the reads' hot path: made only
        when refused)."""
        decision = self.decide(kind, op, asset, parent=parent)
        if decision.allowed:
            return
        target = parent if op == "create" else asset
        if missing is not None and target is not None and not self.sees(target.type, target):
            raise missing() if callable(missing) else missing
        raise denied(decision.reason)

    def require_view_owner_change(self, view: Asset, new_owner: str) -> None:
        """The 2.1 spec's updateTable rule for views: changing a VIEW's owner requires that the caller
        is the new owner or a member of it (a view runs with its owner's rights, so handing it to a
        principal one does not belong to would lend that principal's access). Account admins excepted."""
        if self.admin == "account admin" or new_owner in self.principals:
            return
        raise denied(f"{self._caller()} may not make '{new_owner}' the owner of view '{view.full_name}': "
                     "changing a view's owner requires being a member of the new owner.")

    def require_storage(self, state, asset: Asset) -> None:
        """Storage inside an external location needs a privilege on it (the 2.1 spec: the external
        table's "permissions requirement of the ... External Location"): CREATE EXTERNAL TABLE /
        CREATE EXTERNAL VOLUME for an EXTERNAL table or volume there, CREATE MANAGED STORAGE for a
        catalog's or schema's storage root there; owning the location also does."""
        if self.admin:
            return
        if asset.type in ("table", "volume"):
            if (asset.info.get("table_type") or asset.info.get("volume_type")) != "EXTERNAL":
                return
            url, privilege = asset.storage_path, f"CREATE EXTERNAL {asset.type.upper()}"
        elif asset.type in ("catalog", "schema"):
            url, privilege = asset.info.get("storage_root"), "CREATE MANAGED STORAGE"
        else:
            return
        hit = state.locations.owner(url) if url else None
        if hit is None:
            return
        n = self.index.find(hit[1].asset_id)
        if n is None or not any(self._alternative(n, want) for want in (P.OWNER, privilege)):
            raise denied(f"{self._caller()} may not use {self._where(n) if n is not None else 'the location'} "
                         f"for '{url}': that needs {privilege} on it.")

    def require_data(self, asset: Asset, *, write: bool, missing: CatalogError | None = None,
                     passing_through: bool = False) -> None:
        """Pure data-access check (for use inside a write): see `require_data_access` (and
        `data_decision` for `passing_through`)."""
        decision = data_decision(self, asset, write=write, passing_through=passing_through)
        if not decision.allowed:
            raise missing if missing is not None and not self.sees(asset.type, asset) else denied(decision.reason)

    # ---- lists ------------------------------------------------------------------------

    def visible_under(self, kind: str, parent: Asset | None) -> BitMap | None:
        """The children of `parent` (None: the metastore) the caller may see in a list of `kind`:
        those it may read (own or inherited grant, ownership, MANAGE), and containers that hold
        something it has a grant on or owns; nothing where it may not use the catalog or schema
        above. None: everything (admins)."""
        if self.admin:
            return None
        if isinstance(self.index, PastIndex):
            return _PastVisible(self, kind, self._n(parent))
        return self._visible_n(kind, self._n(parent))

    def visible_under_id(self, kind: str, parent_id: str | None) -> BitMap | None:
        """`visible_under` by the parent's id, adding nothing to the index: a parent the index does
        not know (dropped since an older snapshot) shows no children. None: everything (admins)."""
        if self.admin:
            return None
        n = 0 if parent_id is None or parent_id == self.index.root_id else self.index.find(parent_id)
        return BitMap() if n is None or (n and not self.index.known(n)) else self._visible_n(kind, n)

    def may_read_known(self, asset: Asset) -> bool:
        """Whether the caller may read an asset the index knows (what reading its grants needs);
        False for one it does not know, without adding it."""
        if self.admin:
            return True
        n = self.index.find(asset.id)
        return n is not None and self.index.known(n) and self.decide(asset.type, "read", asset).allowed

    def _visible_n(self, kind: str, parent_n: int) -> BitMap:
        ix, principals = self.index, self.principals
        if self._uses(ix.chain(parent_n)) is not None:
            return BitMap()
        if kind == "table" and not self.caller.trusted_engine and \
                system_catalog.is_information_schema(ix.name_of(parent_n)):
            return BitMap()         # its tables are for trusted engines and admins only
        marked = ix.owned_by(principals) | ix.granted(principals, MANAGE)
        for want in P.rule(kind, "read").any_of:
            if want == P.ANY:
                marked |= ix.with_any_grant(principals)
            elif want not in (P.ADMINISTER, P.OWNER):
                marked |= ix.granted(principals, want)
        out = ix.covered_children(parent_n, marked)
        if kind in ("catalog", "schema"):
            out |= ix.children.get(parent_n, BitMap()) & ix.above(ix.with_any_grant(principals) |
                                                                   ix.owned_by(principals))
        return out

    def filter(self, kind: str, parent: Asset | None, assets: list[Asset]) -> list[Asset]:
        seen = self.visible_under(kind, parent)
        if seen is None:
            return assets
        return [a for a in assets if self.index.find(a.id) in seen]

    def filter_any(self, kind: str, assets: list[Asset]) -> list[Asset]:
        """Assets of one type under different parents: each parent's visible set computed once."""
        if self.admin:
            return assets
        by_parent: dict[str, BitMap] = {}
        out = []
        for a in assets:
            n = self._n(a)
            if a.parent_id not in by_parent:
                by_parent[a.parent_id] = self._visible_n(kind, self.index.parent_of(n, 0))
            if n in by_parent[a.parent_id]:
                out.append(a)
        return out


_VERB = {"read": "read", "update": "update", "owner": "change the owner of", "delete": "delete",
         "grant": "manage the permissions of", "read_data": "read the data of", "write_data": "write the data of",
         "check": "use", "apply_tag": "tag"}


async def authorizer(shard, caller: Caller) -> Authz:
    """The caller's Authz for its metastore, with the metastore's ABAC policies; account admins need no index.
    A read at a past version (the session's `read_at`, shards/session.py) is decided by today's grants and owners
    over the assets as they were then: a copy of today's index that the assets dropped since join."""
    policies = abac.current_policies(shard, caller.metastore(), caller.min_version)
    if policies is None:
        policies = await abac.policies_of(shard, caller.metastore(), caller.min_version)
    if caller.is_account_admin:
        authz = Authz(caller, None)
    else:
        index = await request_index(shard, caller)
        past = past_read()
        if past is not None:
            index = _past_index(index, shard.version_of(caller.metastore()), past.version)
        authz = Authz(caller, index)
    authz.policies = policies
    return authz


class _PastVisible:
    """`visible_under` at a past version: the assets gone since join the index as the listing
    finds them (after the set was asked for), so the set is worked out again when it grew."""

    def __init__(self, authz: Authz, kind: str, parent_n: int):
        self.authz, self.kind, self.parent_n = authz, kind, parent_n
        self.size, self.bits = -1, BitMap()

    def __contains__(self, n) -> bool:
        if n is None:
            return False
        if n not in self.bits and self.size != len(self.authz.index):
            self.size = len(self.authz.index)
            self.bits = self.authz._visible_n(self.kind, self.parent_n)
        return n in self.bits


class PastIndex(PrivilegeIndex):
    """Today's privilege index, copied, for reads at one past version: an asset the request found
    then (`PastRead.seen`) that is gone today joins it, below its ancestors, when first asked for."""

    def find(self, sid: str) -> int | None:
        n = self._num.get(sid)
        if n is None:
            past = past_read()
            asset = past.seen.get(sid) if past is not None else None
            if asset is not None:
                parent = past.seen.get(asset.parent_id)
                if parent is not None and parent.id not in self._num:
                    self.find(parent.id)
                self.put(asset.id, asset.parent_id, asset.type, asset.info.get("owner"), asset.full_name)
                n = self._num.get(sid)
        return n


# today's index (by identity) -> {(its version, the past version): its copy}: few, reused by the
# reads at one version until the metastore changes.
_PAST_INDEXES: "weakref.WeakKeyDictionary[PrivilegeIndex, dict]" = weakref.WeakKeyDictionary()


def _past_index(index: PrivilegeIndex, today: int | None, version: int) -> PastIndex:
    copies = _PAST_INDEXES.setdefault(index, {})
    found = copies.get((today, version))
    if found is None:
        if len(copies) >= 4:
            copies.clear()
        found = copies[(today, version)] = index.copy(PastIndex)
    return found


# ---- data access: tables, volumes, model versions, external locations ------------------

_DATA_KIND = {"table": "table", "volume": "volume", "model_version": "registered_model",
              "registered_model": "registered_model", "external_location": "external_location",
              "function": "function"}


def has_policies(asset: Asset) -> bool:
    """Whether a table carries a row filter or a column mask (once per asset state: kept in its memo)."""
    found = asset.memo.get("has_policies")
    if found is None:
        found = asset.memo["has_policies"] = asset.type == "table" and (
            bool(asset.info.get("row_filter")) or any(c.get("mask") for c in asset.info.get("columns") or []))
    return found


def carries_policies(asset: Asset, policies: list) -> bool:
    """Whether a table is filtered or masked for anyone: its own row filter or column masks, or an
    ABAC policy of the metastore's (`abac.policies_of`) that reaches it. Such a table leaves the
    catalog only to trusted engines: never through a share."""
    return has_policies(asset) or (asset.type == "table" and bool(abac.effective(asset, policies, frozenset(),
                                                                                  everyone=True)))


def data_decision(authz: Authz, asset: Asset, *, write: bool, parent: Asset | None = None,
                  passing_through: bool = False) -> Decision:
    """The data-access decision for one asset (a model version is decided on its model, `parent`).
    `passing_through`: a write to a foreign table that the foreign system itself commits (a commit
    passed through to it, the credentials for it, lineage into it: catalog/tree/foreign_writes.py),
    decided as for a native table; every other writer is refused a foreign table's data."""
    if write and is_mirrored(asset) and not passing_through:    # every writer of data asks here: commits, credentials
        return Decision(False, reason=f"Table '{asset.full_name}' lies in a foreign catalog (connection "
                                      f"'{connection_of(asset)}'): its data is written in the foreign system, "
                                      "not through shardcat.")
    governed = authz.effective(asset)      # ABAC policies that apply to this caller (abac.py)
    if governed.conflict:
        return Decision(False, reason=f"Table '{asset.full_name}' is governed by conflicting ABAC policies for "
                                      f"this caller: {governed.conflict}.")
    if (has_policies(asset) or governed) and not authz.caller.trusted_engine:
        return Decision(False, reason=f"Table '{asset.full_name}' has a row filter or column masks; only a "
                                      "trusted engine, which enforces them, may read or write its data.")
    kind = _DATA_KIND[asset.type]
    target = parent if asset.type == "model_version" else asset
    return authz.decide(kind, "write_data" if write else "read_data", target)


async def require_data_access(shard, caller: Caller, asset: Asset, *, write: bool,
                              missing: CatalogError | None = None) -> None:
    """Raise PERMISSION_DENIED unless `caller` may read (or, with `write`, change) `asset`'s data:
    SELECT/MODIFY on a table, READ/WRITE VOLUME on a volume, EXECUTE on a model version's model
    (writing its files: the model's owner or MANAGE), READ/WRITE FILES on an external location;
    each with USE CATALOG and USE SCHEMA on the parents. Tables with row filters or column
    masks are for trusted engines only. With `missing`: a caller that may not see the asset
    (the model, for a version) gets that error instead, the one a missing asset gives."""
    authz = await authorizer(shard, caller)
    parent = None
    if asset.type == "model_version":
        ms = caller.metastore()
        parent = await shard.lookup_id(ms, asset.parent_id, caller.min_version)
    decision = data_decision(authz, asset, write=write, parent=parent)
    if not decision.allowed:
        seen = parent if asset.type == "model_version" else asset
        if missing is not None and seen is not None and not authz.sees(seen.type, seen):
            raise missing
        raise denied(decision.reason)


def present_table(caller: Caller, out: dict) -> dict:
    """A table as this caller may see it: row filter and column masks for trusted engines only."""
    if caller.trusted_engine:
        return out
    out.pop("row_filter", None)
    if out.get("columns") and any("mask" in c for c in out["columns"]):
        out["columns"] = [{k: v for k, v in c.items() if k != "mask"} for c in out["columns"]]
    return out
