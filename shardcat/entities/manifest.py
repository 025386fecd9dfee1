"""Declarative asset-type manifests and the generic create/update field rules they drive.

Each asset type is described once: its parent type, the namespace its names live
in, and its fields with the Unity Catalog 2.1 rules for create and update:
REQ (must be given), OPT (may be given), IGN (silently dropped), ERR (refused).
Fields not in a manifest are ignored, as Unity Catalog servers do.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import invalid
from .names import check_principal
from .secrets import shown

REQ, OPT, IGN, ERR = "REQ", "OPT", "IGN", "ERR"


def _is_str(v) -> bool:
    return isinstance(v, str)


def _is_bool(v) -> bool:
    return isinstance(v, bool)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _is_list(v) -> bool:
    return isinstance(v, list)


def _is_object(v) -> bool:
    return isinstance(v, dict)


KINDS = {
    "string": _is_str,
    "bool": _is_bool,
    "int": _is_int,
    "map<string,string>": _is_str_map,
    "list": _is_list,
    "object": _is_object,
    "principal": _is_str,          # a principal's name (owner): checked and normalised by NORMALISE
}

# Kinds whose values are normalised (or refused) beyond their type: value, field name -> value.
NORMALISE = {"principal": check_principal}


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    create: str
    update: str

    def __post_init__(self):
        assert self.kind in KINDS and self.create in (REQ, OPT, IGN, ERR) and self.update in (REQ, OPT, IGN, ERR)


@dataclass(frozen=True)
class AssetType:
    name: str                  # "catalog"
    securable_type: str        # "CATALOG"
    parent: str                # parent type name, "metastore" for top-level types
    namespace: str             # names are unique per (metastore, namespace)
    name_parts: int            # parts in the full name: catalog 1, schema 2, table 3
    id_field: str              # the id's field name on the wire: "id", "schema_id", "table_id"
    list_key: str              # the list response's key: "catalogs"
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    def check_create(self, body: dict) -> dict:
        """The create request's fields this type keeps, type-checked; REQ missing or ERR given: error."""
        return self._check(body, "create")

    def check_update(self, body: dict) -> dict:
        return self._check(body, "update")

    def _check(self, body: dict, op: str) -> dict:
        kept = {}
        for f in self.fields:
            rule = getattr(f, op)
            value = body.get(f.name)
            if value is None:
                if rule == REQ:
                    raise invalid(f"Missing required field '{f.name}' to {op} a {self.name}.")
                continue
            if rule == IGN:
                continue
            if rule == ERR:
                raise invalid(f"Field '{f.name}' cannot be set when you {op} a {self.name}.")
            if not KINDS[f.kind](value):
                # A map's values are not quoted: a connection's options hold its secrets, whatever was sent.
                quoted = "" if f.kind.startswith("map") else shown(f.name, value)
                raise invalid(f"Field '{f.name}' must be a {'string' if f.kind == 'principal' else f.kind}, "
                              f"got {type(value).__name__}{quoted}.")
            normalise = NORMALISE.get(f.kind)
            kept[f.name] = normalise(value, f.name) if normalise else value
        return kept
