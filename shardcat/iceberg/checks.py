"""Type checks of what an Iceberg request carries, before metadata.py applies it: a field's default value
against the field's type, and the fields of the REST spec's view updates.

pyiceberg reads a default (`initial-default`, `write-default`) by the field's type without checking it
(an int column takes "abc"), and has no models for view updates; what either lets through would be
written into a metadata file every engine then fails to read, or fail later as a server error. Each
check raises a 400 (errors.invalid) naming the field. Pure functions, no I/O.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType,
                             IntegerType, LongType, NestedField, StringType, TimestampType, TimestamptzType,
                             TimeType, UUIDType)
from pyiceberg.view.metadata import ViewVersion

from ..errors import invalid

# A default's Python value (as pyiceberg's from_json leaves it) for each primitive type.
_INT_RANGE = {IntegerType: 31, LongType: 63}
_PYTHON = {BooleanType: bool, FloatType: (int, float), DoubleType: (int, float), StringType: str,
           DateType: datetime.date, TimeType: datetime.time, UUIDType: uuid.UUID, BinaryType: bytes,
           FixedType: bytes, DecimalType: Decimal}


def _default_problem(field: NestedField, value) -> str | None:
    kind = type(field.field_type)
    if kind in _INT_RANGE:
        bits = _INT_RANGE[kind]
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        return None if -(1 << bits) <= value < (1 << bits) else f"is out of range for {field.field_type}"
    if isinstance(field.field_type, (TimestampType, TimestamptzType)) or str(field.field_type).startswith("timestamp"):
        return None if isinstance(value, datetime.datetime) else "must be a timestamp"
    wanted = _PYTHON.get(kind)
    if wanted is None:               # nested, unknown, variant, geometry: no default value the spec allows here
        return f"is not allowed for a {field.field_type} field"
    if isinstance(value, bool) and wanted is not bool:
        return f"must be a {field.field_type}"
    if not isinstance(value, wanted):
        return f"must be a {field.field_type}"
    if isinstance(field.field_type, DecimalType):
        if not value.is_finite() or -value.as_tuple().exponent != field.field_type.scale or \
                len(value.as_tuple().digits) > field.field_type.precision:
            return f"does not fit {field.field_type}"
    return None


def check_defaults(schema: Schema, what: str) -> None:
    """Every field's `initial-default` and `write-default` fits its type (a 400 naming the first that does not)."""
    for field in index_by_id(schema).values():
        for key, value in (("initial-default", field.initial_default), ("write-default", field.write_default)):
            if value is None:
                continue
            problem = _default_problem(field, value)
            if problem:
                raise invalid(f"Invalid {what}: the {key} of field '{field.name}' {problem}.")


def parse_schema(raw, what: str) -> Schema:
    """A schema sent as JSON, parsed by pyiceberg and its defaults checked."""
    if not isinstance(raw, dict):
        raise invalid(f"Invalid {what}: schema must be an object.")
    try:
        schema = Schema.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        raise invalid(f"Invalid {what}: schema.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}.") from None
    except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as e:
        raise invalid(f"Invalid {what}: schema: {e}.") from None
    check_defaults(schema, what)
    return schema


# ---- view updates ---------------------------------------------------------------------------------

class _Update(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _AssignUuid(_Update):
    uuid: StrictStr


class _UpgradeFormat(_Update):
    format_version: StrictInt = Field(alias="format-version")


class _AddSchema(_Update):
    schema_: dict = Field(alias="schema")
    last_column_id: StrictInt | None = Field(alias="last-column-id", default=None)


class _SetLocation(_Update):
    location: StrictStr


class _SetProperties(_Update):
    updates: dict[StrictStr, StrictStr]


class _RemoveProperties(_Update):
    removals: list[StrictStr]


class _AddVersion(_Update):
    view_version: dict = Field(alias="view-version")


class _SetCurrentVersion(_Update):
    view_version_id: StrictInt = Field(alias="view-version-id")


_VIEW_UPDATES = {"assign-uuid": _AssignUuid, "upgrade-format-version": _UpgradeFormat, "add-schema": _AddSchema,
                 "set-location": _SetLocation, "set-properties": _SetProperties,
                 "remove-properties": _RemoveProperties, "add-view-version": _AddVersion,
                 "set-current-view-version": _SetCurrentVersion}


def check_view_update(update) -> None:
    """A view update of the REST spec with its fields of the right types (a 400 naming the first wrong one);
    an added schema and view version are parsed as pyiceberg's models, a version with at least one query."""
    action = update.get("action") if isinstance(update, dict) else None
    model = _VIEW_UPDATES.get(action) if isinstance(action, str) else None
    if model is None:
        raise invalid(f"Unknown view update action {action!r:.40}.")
    try:
        model.model_validate(update)
    except ValidationError as e:
        first = e.errors()[0]
        raise invalid(f"Invalid view update {action}: {'.'.join(str(p) for p in first['loc'])}: "
                      f"{first['msg']}.") from None
    if action == "add-schema":
        parse_schema(update["schema"], "view update add-schema")
    elif action == "add-view-version":
        check_view_version(update["view-version"])


def check_view_version(version) -> None:
    """A view version as pyiceberg's model reads it, with at least one representation (its SQL)."""
    if not isinstance(version, dict):
        raise invalid("Invalid view version: it must be an object.")
    try:
        parsed = ViewVersion.model_validate(version)
    except ValidationError as e:
        first = e.errors()[0]
        raise invalid(f"Invalid view version: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}.") from None
    except (ValueError, TypeError) as e:
        raise invalid(f"Invalid view version: {e}.") from None
    if not parsed.representations:
        raise invalid("Invalid view version: it needs at least one representation (the view's SQL).")
