"""Iceberg table and view metadata for the REST catalog: parse requests, check requirements, apply
updates, read and write metadata files.

pyiceberg does the format: its request models, `update_table_metadata`, the requirement classes'
`validate`, `new_table_metadata`, its location provider and FileIO. Views are the exception:
pyiceberg has view metadata models but no view updates, so the few view update actions of the
REST spec are applied here on the metadata's JSON form and the result is validated by pyiceberg's
model. No HTTP and no catalog state here; the file functions block (run them in a thread).
"""

from __future__ import annotations

import json
import time
import uuid
from io import BytesIO

from cachetools import LRUCache
from pydantic import TypeAdapter, ValidationError
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.rest import CreateTableRequest, CreateViewRequest, RegisterTableRequest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import Compressor, FromByteStream, ToOutputFile
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, TableMetadataV3, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (AddSchemaUpdate, AddSortOrderUpdate, AssertCreate, AssertCurrentSchemaId, AssertDefaultSortOrderId,
                                    AssertDefaultSpecId, AssertLastAssignedFieldId, AssertLastAssignedPartitionId,
                                    AssertTableUUID, RemovePropertiesUpdate, SetDefaultSortOrderUpdate,
                                    SetPropertiesUpdate, TableRequirement, TableUpdate, UpgradeFormatVersionUpdate,
                                    update_table_metadata)
from pyiceberg.types import (DecimalType, ListType, MapType, NestedField, PrimitiveType, StructType)
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.view.metadata import ViewMetadata

from ..entities.urls import InvalidUrl, is_within
from ..entities.vended import iceberg_properties as cloud_properties
from ..errors import CatalogError, invalid
from .checks import check_defaults, check_view_update
from .defaults import keep_defaults

METADATA_LOCATION = "metadata_location"                    # the table's row keeps its current metadata file here
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
WRITE_METADATA_PATH = "write.metadata.path"                 # a table's or view's property: its metadata folder

_REQUIREMENTS = TypeAdapter(list[TableRequirement])
_UPDATES = TypeAdapter(list[TableUpdate])


def _problem(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _model(model, body: dict, what: str):
    props = body.get("properties")
    if props is not None and not isinstance(props, dict):
        raise invalid(f"Invalid {what}: properties must be an object.")
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise invalid(f"Invalid {what}: {_problem(e)}.") from None
    except (ValueError, TypeError, AttributeError, KeyError, ArithmeticError) as e:   # pyiceberg's own validators
        raise invalid(f"Invalid {what}: {e}.") from None


# ---- requests ---------------------------------------------------------------------------------


def create_request(body: dict) -> CreateTableRequest:
    # Other clients leave out what pyiceberg's model spells as required-but-nullable.
    request = _model(CreateTableRequest, {"location": None, "partition-spec": None, "write-order": None, **body},
                     "CreateTableRequest")
    check_defaults(request.table_schema, "CreateTableRequest")
    return request


def register_request(body: dict) -> RegisterTableRequest:
    return _model(RegisterTableRequest, {"overwrite": False, **body}, "RegisterTableRequest")


def view_request(body: dict) -> CreateViewRequest:
    request = _model(CreateViewRequest, {"location": None, **body}, "CreateViewRequest")
    check_defaults(request.view_schema, "CreateViewRequest")
    return request


def changes(body: dict) -> tuple[list, list]:
    """(requirements, updates) of a CommitTableRequest, as pyiceberg objects."""
    try:
        requirements = _REQUIREMENTS.validate_python(body.get("requirements") or [])
        updates = _UPDATES.validate_python(body.get("updates") or [])
    except ValidationError as e:
        raise invalid(f"Invalid CommitTableRequest: {_problem(e)}.") from None
    except (ValueError, TypeError, ArithmeticError) as e:     # pyiceberg reading a default by a type it cannot
        raise invalid(f"Invalid CommitTableRequest: {e}.") from None
    for update in updates:
        if isinstance(update, AddSchemaUpdate):
            check_defaults(update.schema_, "CommitTableRequest")
    return requirements, updates


def asserts_create(requirements: list) -> bool:
    return any(isinstance(r, AssertCreate) for r in requirements)


# ---- table metadata ---------------------------------------------------------------------------


_NEWEST_FORMAT = 3


def _writable(metadata: TableMetadata) -> TableMetadata:
    if metadata.format_version > _NEWEST_FORMAT:
        raise invalid(f"Iceberg format version {metadata.format_version} is not supported; use 1, 2 or 3.")
    if metadata.format_version >= 3 and metadata.next_row_id is None:
        # v3 tracks row lineage from the table's first row: a v3 table (new or upgraded) starts at row id 0
        metadata = metadata.model_copy(update={"next_row_id": 0})
    return metadata


def _upgraded(base: TableMetadata, updates: list) -> tuple[TableMetadata, list]:
    """(base, updates) with an upgrade to format version 3 done on the base first. pyiceberg applies
    every other update to v3 metadata but refuses to upgrade to it (it cannot write v3 data files yet);
    an upgrade is the same whichever update it comes after, so it is applied first (a later snapshot then
    gets v3's row lineage, as the spec has it)."""
    wanted = max((u.format_version for u in updates if isinstance(u, UpgradeFormatVersionUpdate)), default=None)
    if wanted is None or wanted < 3:
        return base, updates
    if wanted > _NEWEST_FORMAT:
        raise invalid(f"Iceberg format version {wanted} is not supported; use 1, 2 or 3.")
    rest = [u for u in updates if not isinstance(u, UpgradeFormatVersionUpdate)]
    if base.format_version >= wanted:
        return base, rest
    # built unvalidated, as pyiceberg's own upgrades are (an empty create's base has no schema yet); row
    # lineage starts at 0 whatever the base carries (pyiceberg's v2 model has the field too, unset)
    fields = {k: v for k, v in dict(base).items()
              if k not in ("schema_", "partition_spec", "format_version", "next_row_id")}
    return TableMetadataV3.model_construct(**fields, format_version=3, next_row_id=0), rest


def _present_removals(base: TableMetadata, updates: list) -> list:
    """The updates with each remove-properties keeping only the keys set at that point: removing a
    property that is not set is no error in the spec (pyiceberg's KeyError would be)."""
    present, out = set(base.properties), []
    for update in updates:
        if isinstance(update, SetPropertiesUpdate):
            present |= set(update.updates)
        elif isinstance(update, RemovePropertiesUpdate):
            removals = [k for k in update.removals if k in present]
            present -= set(removals)
            if not removals:
                continue
            update = update.model_copy(update={"removals": removals})
        out.append(update)
    return out


def new_metadata(request: CreateTableRequest, location: str) -> TableMetadata:
    try:
        metadata = new_table_metadata(
            schema=request.table_schema, partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            sort_order=request.write_order or UNSORTED_SORT_ORDER, location=location,
            properties=dict(request.properties))
    except (ValueError, TypeError) as e:
        raise invalid(f"Cannot create the table's metadata: {e}") from None
    fresh = keep_defaults(metadata.schema(), request.table_schema)       # pyiceberg's renumbering drops them
    if fresh is not metadata.schema():
        metadata = metadata.model_copy(update={"schemas": [fresh]})
    return _writable(metadata)


def empty_metadata() -> TableMetadata:
    """The base a create-transaction's updates apply to: pyiceberg's own catalogs' empty metadata."""
    return MetastoreCatalog._empty_table_metadata()


def updated(base: TableMetadata | None, base_location: str | None, requirements: list, updates: list) -> TableMetadata:
    """The metadata a commit leaves: every requirement checked against `base` (None: the table does
    not exist yet), then the updates applied. A failed requirement is a RESOURCE_CONFLICT (409)."""
    for requirement in requirements:
        try:
            requirement.validate(base)
        except CommitFailedException as e:
            raise CatalogError("RESOURCE_CONFLICT", _requirement_failed(requirement, base, e)) from None
    start = base if base is not None else empty_metadata()
    if base is not None:
        updates = _sort_orders_numbered(base, updates)
    start, updates = _upgraded(start, _present_removals(start, updates))
    try:
        metadata = update_table_metadata(start, tuple(updates),
                                         enforce_validation=base is None, metadata_location=base_location)
    except (ValueError, TypeError, ValidationError) as e:
        raise invalid(f"Cannot apply the commit's updates: {e}") from None
    except (StopIteration, LookupError):        # pyiceberg looking up a spec, schema or order none added
        raise invalid("Cannot apply the commit's updates: they leave no current schema, partition spec or "
                      "sort order.") from None
    return _writable(metadata)


# A failed requirement in the words of Iceberg's reference catalog, which Java clients (and Iceberg's
# compatibility kit) read: (what changed, the requirement's value, the table's value).
_REQUIREMENT_WORDS = {
    AssertLastAssignedFieldId: ("last assigned field id", "last_assigned_field_id", "last_column_id"),
    AssertCurrentSchemaId: ("current schema", "current_schema_id", "current_schema_id"),
    AssertLastAssignedPartitionId: ("last assigned partition id", "last_assigned_partition_id", "last_partition_id"),
    AssertDefaultSpecId: ("default partition spec", "default_spec_id", "default_spec_id"),
    AssertDefaultSortOrderId: ("default sort order", "default_sort_order_id", "default_sort_order_id"),
}


def _requirement_failed(requirement: TableRequirement, base: TableMetadata | None, e: Exception) -> str:
    if isinstance(requirement, AssertCreate):
        return "Requirement failed: table already exists"
    if base is None:
        return str(e)
    if isinstance(requirement, AssertTableUUID):
        return f"Requirement failed: UUID does not match: expected {base.table_uuid} != {requirement.uuid}"
    words = _REQUIREMENT_WORDS.get(type(requirement))
    if words is None:
        return str(e)                   # pyiceberg's words (a branch or tag's) are the reference's already
    what, wanted, found = words
    return (f"Requirement failed: {what} changed: expected id {getattr(requirement, wanted)} != "
            f"{getattr(base, found)}")


def _sort_orders_numbered(base: TableMetadata, updates: list) -> list:
    """The updates with each added sort order numbered as the reference catalog numbers it: an order
    the table has already keeps its id (and is not added twice), a new one whose id is taken gets the
    next free one. A replace transaction adds its order against the metadata it started from, so a
    concurrent replace may have taken that id meanwhile (pyiceberg would refuse the clash)."""
    orders = {order.order_id: order for order in base.sort_orders}
    out, last_added = [], None
    for update in updates:
        if isinstance(update, AddSortOrderUpdate):
            order = update.sort_order
            same = next((o for o in orders.values() if o.fields == order.fields), None)
            if same is not None:
                last_added = same.order_id
                continue
            if order.order_id in orders:
                order = order.model_copy(update={"order_id": max(orders) + 1})
                update = update.model_copy(update={"sort_order": order})
            orders[order.order_id] = order
            last_added = order.order_id
        elif isinstance(update, SetDefaultSortOrderUpdate) and update.sort_order_id == -1 and last_added is not None:
            update = update.model_copy(update={"sort_order_id": last_added})
        out.append(update)
    return out


def next_location(metadata: TableMetadata, previous: str | None) -> str:
    """Where the next metadata file goes: pyiceberg's location provider, numbered after `previous`.
    Always inside the table's own location: `write.metadata.path` may not send it elsewhere (the
    catalog writes there, and only the table's location passed the storage rules)."""
    version = MetastoreCatalog._parse_metadata_version(previous) + 1 if previous else 0
    provider = load_location_provider(metadata.location, metadata.properties)
    location = provider.new_table_metadata_file_location(version)
    _inside(location, metadata.location, "table")
    return location


def _inside(location: str, where: str, what: str) -> None:
    """Refuse a metadata file outside its table's (view's) location: the catalog writes it, and only that
    location passed the storage rules."""
    try:
        inside = is_within(location, where)
    except InvalidUrl:
        inside = False
    if not inside:
        raise invalid(f"The {what}'s metadata files must lie inside its location '{where}'; "
                      f"'{WRITE_METADATA_PATH}' may not send them to '{location.rsplit('/', 1)[0]}'.")


# Metadata files are immutable: a file read once is the same file forever.
_READ: LRUCache = LRUCache(maxsize=512)


def read_metadata(location: str, io: dict) -> TableMetadata:
    """The metadata file at `location`; `io`: pyiceberg FileIO properties (storage credentials)."""
    hit = _READ.get(location)
    if hit is not None:
        return hit
    try:
        with load_file_io(io, location).new_input(location).open() as stream:
            raw = stream.read()
    except FileNotFoundError:
        raise CatalogError("FAILED_PRECONDITION", f"The metadata file '{location}' does not exist.") from None
    except OSError as e:
        raise _storage_error("read", location, e) from None
    try:
        found = FromByteStream.table_metadata(BytesIO(raw), compression=Compressor.get_compressor(location))
    except Exception:
        # Anything the parsers say of a foreign file quotes it (pydantic its values, a decoder its bytes),
        # and register reads files a caller names: said without a word of the content.
        raise invalid(f"'{location}' is not an Iceberg table metadata file.") from None
    _READ[location] = found
    return found


def _storage_error(verb: str, location: str, e: OSError) -> CatalogError:
    """The storage refused the catalog's own metadata I/O (access denied, unreachable): said plainly."""
    return CatalogError("FAILED_PRECONDITION", f"The catalog could not {verb} '{location}': {e}")


def write_metadata(metadata: TableMetadata, location: str, io: dict) -> None:
    try:
        if metadata.format_version >= 3:
            # pyiceberg's v3 model refuses to serialize itself (its writers lack v3 data files, not the JSON):
            # the model's JSON by the base class's serializer, the same the v1 and v2 models use
            raw = IcebergBaseModel.model_dump_json(metadata, exclude_none=True).encode()
            with load_file_io(io, location).new_output(location).create(overwrite=False) as out:
                out.write(Compressor.get_compressor(location).bytes_compressor()(raw))
        else:
            ToOutputFile.table_metadata(metadata, load_file_io(io, location).new_output(location))
    except OSError as e:
        raise _storage_error("write", location, e) from None
    _READ[location] = metadata


def storage_properties(vended: dict, endpoint: str | None, region: str) -> dict:
    """pyiceberg FileIO properties for a TemporaryCredentials answer (governance/vending.py): S3 keys
    (STS session keys, or an S3-compatible store's static ones), their expiry, and where to send them:
    the answer's own endpoint, region and addressing (an s3_compatible credential's), else `endpoint`
    ($SHARDCAT_S3_ENDPOINT) and `region`; another cloud's answer as entities/vended.py spells it. None for file://."""
    aws = vended.get("aws_temp_credentials")
    if not aws:
        return cloud_properties(vended)         # Azure's SAS, or nothing (file://)
    out = {"s3.access-key-id": aws["access_key_id"], "s3.secret-access-key": aws["secret_access_key"],
           "s3.region": vended.get("region") or region,
           "s3.session-token-expires-at-ms": str(vended["expiration_time"])}
    if aws.get("session_token"):
        out["s3.session-token"] = aws["session_token"]
    if vended.get("endpoint_url") or endpoint:
        out["s3.endpoint"] = vended.get("endpoint_url") or endpoint
    if "path_style_access" in vended:
        out["s3.force-virtual-addressing"] = "false" if vended["path_style_access"] else "true"
    return out


def metadata_json(metadata: TableMetadata | ViewMetadata) -> dict:
    return metadata.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_metadata(raw: dict) -> TableMetadata:
    return TableMetadataUtil.parse_obj(raw)


# ---- views --------------------------------------------------------------------------------------


class InvalidViewVersion(CatalogError):
    """A view version the reference catalog refuses as an illegal argument (a 400 whose type Iceberg's Java
    client raises as IllegalArgumentException)."""

    def __init__(self, message: str):
        super().__init__("INVALID_PARAMETER_VALUE", f"Invalid view version: {message}")


def new_view_metadata(request: CreateViewRequest, location: str) -> ViewMetadata:
    """A new view, built by the same updates a replace applies: its schema numbered 0 and its version
    1, as the reference catalog numbers them whatever ids the client sent."""
    version = {**metadata_json(request.view_version), "version-id": 1, "schema-id": -1}
    view = {"view-uuid": str(uuid.uuid4()), "format-version": 1, "location": location, "schemas": [],
            "current-version-id": 0, "versions": [], "version-log": [], "properties": dict(request.properties)}
    return _view(_apply_view_updates(view, [{"action": "add-schema", "schema": metadata_json(request.view_schema)},
                                            {"action": "add-view-version", "view-version": version},
                                            {"action": "set-current-view-version", "view-version-id": -1}]))


def _view(raw: dict) -> ViewMetadata:
    try:
        return ViewMetadata.model_validate(raw)
    except ValidationError as e:
        raise invalid(f"Invalid view metadata: {_problem(e)}.") from None


def updated_view(base: ViewMetadata, requirements: list, updates: list) -> ViewMetadata:
    """A CommitViewRequest applied: requirements (assert-view-uuid), then the REST spec's view updates."""
    for r in requirements:
        if not isinstance(r, dict) or r.get("type") != "assert-view-uuid":
            raise invalid(f"Unknown view requirement {r!r:.80}; expected assert-view-uuid.")
        if r.get("uuid") != base.view_uuid:
            raise CatalogError("RESOURCE_CONFLICT", f"Requirement failed: view UUID does not match: "
                                                    f"expected {base.view_uuid} != {r.get('uuid')}")
    return _view(_apply_view_updates(metadata_json(base), updates))


def _same_schema(one: dict, two: dict) -> bool:
    """Whether two schemas (JSON) have the same fields and identifier fields, whatever their ids."""
    try:
        a, b = Schema.model_validate(one), Schema.model_validate(two)
    except (ValidationError, ValueError, TypeError):
        return False
    return a.fields == b.fields and a.identifier_field_ids == b.identifier_field_ids


_SAME_VERSION_KEYS = ("summary", "representations", "default-catalog", "default-namespace", "schema-id")


def _check_version(version: dict, schema_ids: list) -> None:
    if version.get("schema-id") not in schema_ids:
        raise InvalidViewVersion(f"Cannot add version with unknown schema: {version.get('schema-id')}")
    dialects = set()
    for representation in version.get("representations") or []:
        if isinstance(representation, dict) and representation.get("type") == "sql":
            dialect = str(representation.get("dialect")).lower()
            if dialect in dialects:
                raise InvalidViewVersion(f"Cannot add multiple queries for dialect {dialect}")
            dialects.add(dialect)


def _apply_view_updates(view: dict, updates: list) -> dict:
    """The REST spec's view updates applied to a view's JSON, numbering as the reference catalog does:
    an added schema (version) the view has already keeps that one's id, a new one gets the next id;
    -1 names the schema (version) this commit added."""
    added_schema = added_version = None
    for u in updates:
        check_view_update(u)                # each update's fields of the spec's types (checks.py)
        action = u["action"]
        if action == "assign-uuid":
            if u.get("uuid") != view["view-uuid"]:
                raise invalid("A view's UUID cannot change.")
        elif action == "upgrade-format-version":
            if u.get("format-version") != 1:
                raise invalid(f"Unsupported view format version {u.get('format-version')!r}.")
        elif action == "add-schema":
            schema = u.get("schema") if isinstance(u.get("schema"), dict) else {}
            same = next((s for s in view["schemas"] if _same_schema(s, schema)), None)
            if same is not None:
                added_schema = same.get("schema-id")
            else:
                added_schema = max((s.get("schema-id", -1) for s in view["schemas"]), default=-1) + 1
                view["schemas"] = [*view["schemas"], {**schema, "schema-id": added_schema}]
        elif action == "set-location":
            view["location"] = u.get("location")
        elif action == "set-properties":
            view["properties"] = {**view.get("properties", {}), **(u.get("updates") or {})}
        elif action == "remove-properties":
            view["properties"] = {k: v for k, v in view.get("properties", {}).items()
                                  if k not in (u.get("removals") or [])}
        elif action == "add-view-version":
            version = dict(u.get("view-version") or {})
            if version.get("schema-id") == -1:
                if added_schema is None:
                    raise invalid("add-view-version with schema-id -1 needs an add-schema before it.")
                version["schema-id"] = added_schema
            _check_version(version, [s.get("schema-id") for s in view["schemas"]])
            same = next((v for v in view["versions"]
                         if all(v.get(k) == version.get(k) for k in _SAME_VERSION_KEYS)), None)
            if same is not None:
                added_version = same["version-id"]
            else:
                added_version = max([version.get("version-id") or 1,
                                     *(v["version-id"] + 1 for v in view["versions"])])
                view["versions"] = [*view["versions"], {**version, "version-id": added_version}]
        elif action == "set-current-view-version":
            version_id = u.get("view-version-id")
            if version_id == -1:
                if added_version is None:
                    raise invalid("set-current-view-version -1 needs an add-view-version before it.")
                version_id = added_version
            version = next((v for v in view["versions"] if v["version-id"] == version_id), None)
            if version is None:
                raise invalid(f"View version {version_id!r} does not exist.")
            if version_id != view["current-version-id"]:
                view["current-version-id"] = version_id
                # a version added by this commit dates from its own timestamp, an older one made current from now
                added_now = version_id == added_version and version.get("timestamp-ms") is not None
                view["version-log"] = [*view["version-log"], {
                    "timestamp-ms": version["timestamp-ms"] if added_now else int(time.time() * 1000),
                    "version-id": version_id}]
        else:
            raise invalid(f"Unknown view update action {action!r:.40}.")
    return view


def view_sql(view: ViewMetadata) -> str:
    """The current version's SQL (the first representation), the view's definition in the catalog row."""
    version = next(v for v in view.versions if v.version_id == view.current_version_id)
    return version.representations[0].root.sql


def read_view(location: str, io: dict) -> ViewMetadata:
    try:
        with load_file_io(io, location).new_input(location).open() as stream:
            raw = stream.read()
    except FileNotFoundError:
        raise CatalogError("FAILED_PRECONDITION", f"The view metadata file '{location}' does not exist.") from None
    except OSError as e:
        raise _storage_error("read", location, e) from None
    try:
        return ViewMetadata.model_validate_json(raw)
    except Exception:
        # said without a word of the content (register-view reads files a caller names: see read_metadata)
        raise invalid(f"'{location}' is not an Iceberg view metadata file.") from None


def write_view(view: ViewMetadata, location: str, io: dict) -> None:
    try:
        with load_file_io(io, location).new_output(location).create(overwrite=False) as out:
            out.write(view.model_dump_json(by_alias=True, exclude_none=True).encode())
    except OSError as e:
        raise _storage_error("write", location, e) from None


def next_view_location(view: ViewMetadata, previous: str | None) -> str:
    """Where the view's next metadata file goes: its `write.metadata.path`, else its location's
    `metadata` folder; inside its location either way (as for tables: see next_location)."""
    version = MetastoreCatalog._parse_metadata_version(previous) + 1 if previous else 0
    folder = (view.properties.get(WRITE_METADATA_PATH) or f"{view.location.rstrip('/')}/metadata").rstrip("/")
    location = f"{folder}/{version:05d}-{uuid.uuid4()}.metadata.json"
    _inside(location, view.location, "view")
    return location


# ---- the catalog row's columns --------------------------------------------------------------------

_PRIMITIVES = {  # Iceberg type -> (Unity Catalog type_name, Spark JSON type)
    "boolean": ("BOOLEAN", "boolean"), "int": ("INT", "integer"), "long": ("LONG", "long"),
    "float": ("FLOAT", "float"), "double": ("DOUBLE", "double"), "date": ("DATE", "date"),
    "timestamp": ("TIMESTAMP_NTZ", "timestamp_ntz"), "timestamptz": ("TIMESTAMP", "timestamp"),
    "timestamp_ns": ("TIMESTAMP_NTZ", "timestamp_ntz"), "timestamptz_ns": ("TIMESTAMP", "timestamp"),
    "string": ("STRING", "string"), "uuid": ("STRING", "string"), "binary": ("BINARY", "binary"),
    "time": ("LONG", "long"), "variant": ("VARIANT", "variant"), "unknown": ("NULL", "void"),
}


def _spark_type(t):
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [_spark_field(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {"type": "array", "elementType": _spark_type(t.element_type), "containsNull": not t.element_required}
    if isinstance(t, MapType):
        return {"type": "map", "keyType": _spark_type(t.key_type), "valueType": _spark_type(t.value_type),
                "valueContainsNull": not t.value_required}
    if isinstance(t, PrimitiveType) and str(t).startswith("fixed"):
        return "binary"
    return _PRIMITIVES.get(str(t), ("STRING", "string"))[1]


def _spark_field(f: NestedField) -> dict:
    return {"name": f.name, "type": _spark_type(f.field_type), "nullable": not f.required, "metadata": {}}


def _type_name(t) -> str:
    if isinstance(t, DecimalType):
        return "DECIMAL"
    if isinstance(t, StructType):
        return "STRUCT"
    if isinstance(t, ListType):
        return "ARRAY"
    if isinstance(t, MapType):
        return "MAP"
    if str(t).startswith("fixed"):
        return "BINARY"
    return _PRIMITIVES.get(str(t), ("STRING", "string"))[0]


def columns_of(schema: Schema) -> list[dict]:
    """The table's columns as Unity Catalog ColumnInfo (so UC clients see an Iceberg table's schema)."""
    out = []
    for i, f in enumerate(schema.fields):
        c = {"name": f.name, "type_name": _type_name(f.field_type), "type_text": str(f.field_type),
             "type_json": json.dumps(_spark_field(f)), "position": i, "nullable": not f.required}
        if isinstance(f.field_type, DecimalType):
            c["type_precision"], c["type_scale"] = f.field_type.precision, f.field_type.scale
        if f.doc:
            c["comment"] = f.doc
        out.append(c)
    return out


def renamed_fields(before: Schema, after: Schema) -> dict[str, str]:
    """The top-level columns of `before` that `after` still has, by field id: old name -> new name
    (a renamed column is the same column; catalog/tree/column_governance.py keeps its tags and mask)."""
    names = {f.field_id: f.name for f in after.fields}
    return {f.name: names[f.field_id] for f in before.fields if f.field_id in names}
