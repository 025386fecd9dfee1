"""The privilege model as data: which privileges each securable type takes, their old names,
and for each (securable type, operation) what a caller needs.

Read with the 2.1 spec's per-endpoint authorization notes (seeds/004_*.txt) and Unity
Catalog's current model: privileges are inherited down the hierarchy (a grant on a catalog
covers its schemas and tables, current and future); USAGE is the old name of USE CATALOG /
USE SCHEMA; ALL PRIVILEGES covers everything but MANAGE; ownership of an object or of any
of its ancestors, and MANAGE on it or an ancestor, confer administration (update, delete,
grant, change owner) but not data access below the object itself; metastore admins (the
metastore's owner, user or group) and account admins may do everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cache.privilege_index import ALL_PRIVILEGES, MANAGE
from ..errors import invalid

USE_CATALOG, USE_SCHEMA, BROWSE = "USE CATALOG", "USE SCHEMA", "BROWSE"
SELECT, MODIFY, EXECUTE = "SELECT", "MODIFY", "EXECUTE"
READ_VOLUME, WRITE_VOLUME, READ_FILES, WRITE_FILES = "READ VOLUME", "WRITE VOLUME", "READ FILES", "WRITE FILES"
USE_CONNECTION, CREATE_FOREIGN_CATALOG = "USE CONNECTION", "CREATE FOREIGN CATALOG"

# What may be granted on each securable type: its own privileges and those it passes down to children.
_BELOW_SCHEMA = ("APPLY TAG", BROWSE, "CREATE FUNCTION", "CREATE MODEL", "CREATE TABLE", "CREATE VOLUME",
                 EXECUTE, MANAGE, MODIFY, READ_VOLUME, SELECT, USE_SCHEMA, WRITE_VOLUME)
APPLICABLE: dict[str, tuple[str, ...]] = {
    "metastore": ("CREATE CATALOG", "CREATE EXTERNAL LOCATION", "CREATE STORAGE CREDENTIAL", "CREATE SHARE",
                  "CREATE RECIPIENT", "CREATE PROVIDER", "CREATE CONNECTION"),
    "catalog": (ALL_PRIVILEGES, *sorted(_BELOW_SCHEMA + ("CREATE SCHEMA", USE_CATALOG))),
    "schema": (ALL_PRIVILEGES, *_BELOW_SCHEMA),
    "table": (ALL_PRIVILEGES, "APPLY TAG", BROWSE, MANAGE, MODIFY, SELECT),
    "volume": (ALL_PRIVILEGES, "APPLY TAG", BROWSE, MANAGE, READ_VOLUME, WRITE_VOLUME),
    "function": (ALL_PRIVILEGES, BROWSE, EXECUTE, MANAGE),
    "registered_model": (ALL_PRIVILEGES, "APPLY TAG", BROWSE, EXECUTE, MANAGE),
    "credential": (ALL_PRIVILEGES, "CREATE EXTERNAL LOCATION", "CREATE EXTERNAL TABLE", MANAGE, READ_FILES,
                   WRITE_FILES),
    "external_location": (ALL_PRIVILEGES, BROWSE, "CREATE EXTERNAL TABLE", "CREATE EXTERNAL VOLUME",
                          "CREATE MANAGED STORAGE", MANAGE, READ_FILES, WRITE_FILES),
    "share": (MANAGE,),
    "recipient": (MANAGE,),
    "provider": (MANAGE,),
    "connection": (ALL_PRIVILEGES, CREATE_FOREIGN_CATALOG, MANAGE, USE_CONNECTION),
}
ALL_NAMES = frozenset(p for privs in APPLICABLE.values() for p in privs)

# The path's securable type (2.1 and open-source spellings, any case) -> asset type.
SECURABLE_TYPES = {
    "metastore": "metastore", "catalog": "catalog", "schema": "schema", "table": "table", "view": "table",
    "volume": "volume", "function": "function", "registered_model": "registered_model", "model": "registered_model",
    "credential": "credential", "storage_credential": "credential", "external_location": "external_location",
    "share": "share", "recipient": "recipient", "provider": "provider", "connection": "connection",
}
SECURABLE_TYPE_NAMES = {t: t.upper() for t in set(SECURABLE_TYPES.values())}


def securable_type(name: str) -> str:
    t = SECURABLE_TYPES.get(name.lower().replace("-", "_"))
    if t is None:
        raise invalid(f"Unknown securable type '{name:.40}'; expected one of {', '.join(sorted(SECURABLE_TYPES))}.")
    return t


def privilege_name(name, kind: str) -> str:
    """A privilege as stored: upper case, spaces (USE_CATALOG -> USE CATALOG), old names mapped
    (USAGE -> USE CATALOG / USE SCHEMA, CREATE -> CREATE CATALOG / SCHEMA / TABLE); INVALID if it
    does not apply to the securable type."""
    if not isinstance(name, str):
        raise invalid(f"A privilege must be a string, got {name!r:.40}.")
    p = " ".join(name.replace("_", " ").upper().split())
    if p == "USAGE":
        p = {"catalog": USE_CATALOG, "schema": USE_SCHEMA}.get(kind, p)
    elif p == "CREATE":
        p = {"metastore": "CREATE CATALOG", "catalog": "CREATE SCHEMA", "schema": "CREATE TABLE"}.get(kind, p)
    elif p == "ALL":
        p = ALL_PRIVILEGES
    if p not in APPLICABLE[kind]:
        raise invalid(f"Privilege '{name:.40}' does not apply to a {kind}; it takes "
                      f"{', '.join(APPLICABLE[kind])}.")
    return p


def expand(privileges, kind: str) -> list[str]:
    """ALL PRIVILEGES spelled out for a securable type (effective permissions show what it gives)."""
    out = set()
    for p in privileges:
        out |= set(APPLICABLE.get(kind, ())) - {ALL_PRIVILEGES, MANAGE} if p == ALL_PRIVILEGES else {p}
    return sorted(out)


# ---- the policy ---------------------------------------------------------------------------
ADMINISTER = "ADMINISTER"   # owner of the securable or an ancestor, or MANAGE on it or an ancestor
OWNER = "OWNER"             # owner of the securable itself (an owner has all privileges on what it owns)
ANY = "ANY"                 # some privilege on the securable (granted on it or above it)


@dataclass(frozen=True)
class Rule:
    """What an operation needs: one of `any_of` on `target`, and (if `use`) the right to use
    each catalog and schema above the securable (USE CATALOG / USE SCHEMA, or owning it)."""
    any_of: tuple[str, ...]
    target: str = "self"        # "self", "parent" (create: the container), "metastore"
    use: bool = True

    def names(self) -> str:
        words = {ADMINISTER: "ownership or MANAGE (on it or above it)", OWNER: "ownership",
                 ANY: "some privilege on it"}
        return " or ".join(words.get(a, a) for a in self.any_of)


_ADMIN = Rule((ADMINISTER,))
_READ = {
    "metastore": (ANY,), "catalog": (USE_CATALOG, BROWSE), "schema": (USE_SCHEMA, BROWSE), "table": (SELECT, BROWSE),
    "volume": (READ_VOLUME, BROWSE), "function": (EXECUTE, BROWSE), "registered_model": (EXECUTE, BROWSE),
    "credential": (ANY,), "external_location": (ANY,), "share": (), "recipient": (), "provider": (),
    "connection": (USE_CONNECTION, CREATE_FOREIGN_CATALOG),     # a privilege on the connection itself
}
_CREATE = {
    "catalog": ("CREATE CATALOG", "metastore"), "schema": ("CREATE SCHEMA", "parent"),
    "table": ("CREATE TABLE", "parent"), "staging_table": ("CREATE TABLE", "parent"),
    "volume": ("CREATE VOLUME", "parent"), "function": ("CREATE FUNCTION", "parent"),
    "registered_model": ("CREATE MODEL", "parent"), "credential": ("CREATE STORAGE CREDENTIAL", "metastore"),
    "external_location": ("CREATE EXTERNAL LOCATION", "metastore"), "share": ("CREATE SHARE", "metastore"),
    "recipient": ("CREATE RECIPIENT", "metastore"), "provider": ("CREATE PROVIDER", "metastore"),
    "connection": ("CREATE CONNECTION", "metastore"),
}
_DATA = {   # (read, write) of a securable's data
    "table": ((OWNER, SELECT), (OWNER, MODIFY)),
    "volume": ((OWNER, READ_VOLUME), (OWNER, WRITE_VOLUME)),
    "registered_model": ((OWNER, EXECUTE), (ADMINISTER,)),   # writing a version's files: the model's admins
    "function": ((OWNER, EXECUTE), (OWNER,)),
    "external_location": ((OWNER, READ_FILES), (OWNER, WRITE_FILES)),
    # A connection's "data" is the foreign system it reaches: USE CONNECTION to go through it (refresh
    # a foreign catalog), CREATE FOREIGN CATALOG to mount one of its catalogs.
    "connection": ((OWNER, USE_CONNECTION), (OWNER, CREATE_FOREIGN_CATALOG)),
}


def rule(kind: str, op: str) -> Rule:
    """The rule for an operation: read, create, update, owner (change it), delete, grant, read_data, write_data,
    apply_tag."""
    if op == "read":
        return Rule((ADMINISTER, OWNER, *_READ[kind]))
    if op == "create":     # the container's owner has every privilege on it, CREATE ... included
        privilege, target = _CREATE[kind]
        return Rule((OWNER, privilege), target=target)
    if op in ("update", "owner", "delete", "grant"):
        return _ADMIN
    if op in ("read_data", "write_data"):
        return Rule(_DATA[kind][op == "write_data"])
    if op == "apply_tag":     # set or remove a tag: APPLY TAG (on it or above it), or administering it
        return Rule((ADMINISTER, "APPLY TAG"))
    raise KeyError(op)


OPERATIONS = ("read", "create", "update", "owner", "delete", "grant", "read_data", "write_data", "apply_tag")
