"""Column default values (`initial-default`, `write-default`) kept where pyiceberg drops them: its
`new_table_metadata` renumbers a new table's schema (assign_fresh_schema_ids) and leaves the defaults out,
so a v3 table created with a default would lose it. The defaults go back on the renumbered fields, found by
their column names. (Their types are checked before: checks.py.) Pure functions over pyiceberg's schemas."""

from __future__ import annotations

from pyiceberg.schema import Schema, index_by_id
from pyiceberg.types import ListType, MapType, NestedField, StructType


def keep_defaults(fresh: Schema, given: Schema) -> Schema:
    """`fresh` (renumbered from `given`) with `given`'s column defaults on the columns of the same names."""
    defaults = {given.find_column_name(f.field_id): (f.initial_default, f.write_default)
                for f in index_by_id(given).values() if f.initial_default is not None or f.write_default is not None}
    if not defaults:
        return fresh
    names = {f.field_id: fresh.find_column_name(f.field_id) for f in index_by_id(fresh).values()}
    struct = _struct(fresh.as_struct(), names, defaults)
    return Schema(*struct.fields, schema_id=fresh.schema_id, identifier_field_ids=fresh.identifier_field_ids)


def _field(field: NestedField, names: dict, defaults: dict) -> NestedField:
    initial, write = defaults.get(names.get(field.field_id), (None, None))
    return NestedField(field_id=field.field_id, name=field.name, field_type=_type(field.field_type, names, defaults),
                       required=field.required, doc=field.doc, initial_default=initial, write_default=write)


def _struct(struct: StructType, names: dict, defaults: dict) -> StructType:
    return StructType(*[_field(f, names, defaults) for f in struct.fields])


def _type(t, names: dict, defaults: dict):
    if isinstance(t, StructType):
        return _struct(t, names, defaults)
    if isinstance(t, ListType):
        return ListType(element_id=t.element_id, element=_type(t.element_type, names, defaults),
                        element_required=t.element_required)
    if isinstance(t, MapType):
        return MapType(key_id=t.key_id, key_type=_type(t.key_type, names, defaults), value_id=t.value_id,
                       value_type=_type(t.value_type, names, defaults), value_required=t.value_required)
    return t
