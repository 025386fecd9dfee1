"""Clients of the foreign catalog systems a connection reaches, each answering in the Unity Catalog API's shapes.

Another Unity Catalog over plain HTTP (aiohttp), an Iceberg REST catalog through pyiceberg's REST
client, AWS Glue through boto3. Each answers three questions: the schemas (`schemas`), a schema's
tables (`tables`: full TableInfo dicts, or only names for systems whose lists carry no more, marked
`"partial": True`) and one table (`table`: columns, type, format, storage location, properties; None
when it does not exist). Nothing here decides governance: foreign.py mirrors the
answers into shardcat's own assets.

Where calls go: a connection's host is resolved and vetted before every use by web/destinations.py's
rules (public addresses only, unless the operator allowed the host by name: `--webhook-allow-host`),
and the client connects to the vetted address itself (the name kept in the Host header), so a name
that resolves elsewhere a moment later reaches nothing unchecked. No redirect is followed, and an
Iceberg REST server's configuration may not move the client to another address. Whatever goes wrong
on the way is `Unreachable`, with a message that never holds a secret option.
"""

from __future__ import annotations

import asyncio
import json
import re

import aiohttp
from yarl import URL

from ...entities.columns import check_columns
from ...errors import CatalogError
from ...web.destinations import Refused, vetted_addresses
from ...web.wire import PREFIX

TIMEOUT_SECONDS = 10.0
UC_PAGE = 1000


class Unreachable(Exception):
    """The foreign system did not answer as it should (down, refused, an error status)."""


def refused_address(host: str) -> CatalogError:
    return CatalogError("INVALID_PARAMETER_VALUE",
                        f"The connection's host '{host:.80}' is not an address shardcat calls: only public "
                        "addresses are reached (or hosts the operator allowed).")


def _option(options: dict, key: str, what: str) -> str:
    value = options.get(key)
    if not isinstance(value, str) or not value:
        raise CatalogError("INVALID_PARAMETER_VALUE", f"A {what} connection needs option '{key}'.")
    return value


def http_url(value: str, key: str) -> URL:
    """An http(s) URL option, or INVALID_PARAMETER_VALUE (never showing more than the URL)."""
    try:
        url = URL(value)
    except (ValueError, TypeError):
        url = None
    # No user, query or fragment: a secret spelled into the URL would be shown wherever the URL is.
    if url is None or url.scheme not in ("http", "https") or not url.raw_host or url.user or url.password \
            or url.fragment or url.raw_query_string:
        raise CatalogError("INVALID_PARAMETER_VALUE", f"Option '{key}' must be an http:// or https:// URL with a "
                                                      "host and no user, query or fragment.")
    return url


async def pinned(url: URL, allowed) -> tuple[URL, str]:
    """(`url` with its host replaced by a vetted address, the Host header) or INVALID_PARAMETER_VALUE."""
    try:
        address = (await vetted_addresses(url, allowed))[0]
    except Refused:
        raise refused_address(url.raw_host or "") from None
    host = f"[{url.raw_host}]" if ":" in url.raw_host else url.raw_host
    return url.with_host(address), host if url.is_default_port() else f"{host}:{url.port}"


async def threaded(fn, *args):
    """A blocking client's call (pyiceberg's, boto3's, Thrift's) in a worker thread, bounded in time;
    whatever it raises but our own refusals is `Unreachable` (its kind only: no message, no secret)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), TIMEOUT_SECONDS * 3)
    except (CatalogError, Unreachable):
        raise
    except Exception as e:
        raise Unreachable(type(e).__name__) from None


# ---- another Unity Catalog ----------------------------------------------------------------


class UnityCatalogSystem:
    """Options: `url` (the server, e.g. https://uc.example.com, or its API base), `bearer_token`
    (secret); a foreign catalog names the catalog there (`catalog`)."""

    kind = "UNITY_CATALOG"

    def __init__(self, options: dict, catalog_options: dict, allowed):
        url = http_url(_option(options, "url", self.kind), "url")
        self.base = url if url.path.rstrip("/") else url.with_path(PREFIX)
        self.token = options.get("bearer_token")
        self.catalog = _option(catalog_options, "catalog", "UNITY_CATALOG foreign catalog")
        self.allowed = allowed
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _get(self, path: str, params: dict | None = None):
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS))
        url = self.base.with_path(self.base.path.rstrip("/") + path, encoded=False).with_query(params or {})
        target, host = await pinned(url, self.allowed)
        headers = {"Host": host, **({"Authorization": f"Bearer {self.token}"} if self.token else {})}
        tls = {"server_hostname": url.raw_host} if url.scheme == "https" else {}
        try:
            async with self._session.get(target, headers=headers, allow_redirects=False, **tls) as answer:
                if answer.status == 404:
                    return None
                if answer.status != 200:
                    raise Unreachable(f"it answered HTTP {answer.status}")
                return await answer.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            raise Unreachable(type(e).__name__) from None

    async def _pages(self, path: str, params: dict, key: str) -> list[dict]:
        out, token = [], None
        while True:
            page = await self._get(path, {**params, "max_results": str(UC_PAGE), **({"page_token": token} if token else {})})
            if page is None:
                return out
            out += [x for x in page.get(key) or [] if isinstance(x, dict)]
            token = page.get("next_page_token")
            if not token:
                return out

    async def schemas(self) -> list[dict]:
        found = await self._pages("/schemas", {"catalog_name": self.catalog}, "schemas")
        return [_schema(s.get("name"), s.get("comment"), s.get("properties")) for s in found
                if s.get("name") != "information_schema"]

    async def tables(self, schema: str) -> list[dict]:
        found = await self._pages("/tables", {"catalog_name": self.catalog, "schema_name": schema}, "tables")
        return [t for t in (_uc_table(x) for x in found) if t is not None]

    async def table(self, schema: str, name: str) -> dict | None:
        found = await self._get(f"/tables/{self.catalog}.{schema}.{name}")
        return _uc_table(found) if isinstance(found, dict) else None


def _schema(name, comment, properties) -> dict:
    return {"name": name, "comment": comment if isinstance(comment, str) else None,
            "properties": {k: v for k, v in (properties or {}).items() if isinstance(v, str)}
            if isinstance(properties, dict) else {}}


def _columns(columns) -> list[dict]:
    try:
        return check_columns([{k: v for k, v in c.items() if k != "mask"} for c in columns or [] if isinstance(c, dict)])
    except CatalogError:
        return []


def _uc_table(t: dict) -> dict | None:
    if not isinstance(t.get("name"), str):
        return None
    table_type = t.get("table_type") if t.get("table_type") in ("VIEW", "MATERIALIZED_VIEW") else "EXTERNAL"
    return {"name": t["name"], "table_type": table_type, "data_source_format": t.get("data_source_format"),
            "columns": _columns(t.get("columns")), "storage_location": t.get("storage_location"),
            "view_definition": t.get("view_definition"), "comment": t.get("comment"),
            "properties": {k: v for k, v in (t.get("properties") or {}).items() if isinstance(v, str)}}


# ---- an Iceberg REST catalog ------------------------------------------------------------------


class IcebergRestSystem:
    """Options: `uri` (the REST catalog's base, before /v1), `warehouse` (optional), `token`
    (secret, a bearer token). A foreign catalog may name another warehouse (`warehouse`)."""

    kind = "ICEBERG_REST"

    def __init__(self, options: dict, catalog_options: dict, allowed):
        self.uri = http_url(_option(options, "uri", self.kind), "uri")
        self.warehouse = catalog_options.get("warehouse") or options.get("warehouse")
        self.token = options.get("token")
        self.allowed = allowed

    async def close(self) -> None:
        pass

    async def rest_catalog(self):
        """pyiceberg's REST catalog at an address vetted now: the writes that pass through use it (foreign_writes.py)."""
        return await self._catalog()

    async def _catalog(self):
        """A pyiceberg REST catalog aimed at an address vetted now (it fetches /v1/config at once)."""
        target, host = await pinned(self.uri, self.allowed)
        properties = {"uri": str(target), "header.Host": host}
        if self.warehouse:
            properties["warehouse"] = self.warehouse
        if self.token:
            properties["token"] = self.token
        return await self._run(_rest_catalog, properties)

    async def _run(self, fn, *args):
        return await threaded(fn, *args)

    async def schemas(self) -> list[dict]:
        catalog = await self._catalog()
        found = await self._run(catalog.list_namespaces)
        return [_schema(ns[0], None, None) for ns in found if len(ns) == 1]

    async def tables(self, schema: str) -> list[dict]:
        catalog = await self._catalog()
        found = await self._run(_listed_tables, catalog, schema)
        return [{"name": ident[-1], "partial": True} for ident in found]

    async def table(self, schema: str, name: str) -> dict | None:
        catalog = await self._catalog()
        return await self._run(_loaded_table, catalog, schema, name)


def _rest_catalog(properties: dict):
    from pyiceberg.catalog.rest import RestCatalog
    wanted = properties["uri"]
    catalog = RestCatalog("foreign", **properties)
    catalog._session.max_redirects = 0       # a redirect would lead somewhere not vetted
    catalog._session.trust_env = False       # nor through a proxy the environment names
    if catalog.properties.get("uri") != wanted or catalog.properties.get("oauth2-server-uri"):
        raise Unreachable("its configuration moves the client to another address")
    return catalog


def _listed_tables(catalog, schema: str) -> list:
    from pyiceberg.exceptions import NoSuchNamespaceError
    try:
        return catalog.list_tables((schema,))
    except NoSuchNamespaceError:
        return []


def _loaded_table(catalog, schema: str, name: str) -> dict | None:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from ...iceberg.metadata import METADATA_LOCATION, columns_of
    try:
        table = catalog.load_table((schema, name))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    metadata = table.metadata
    properties = {k: v for k, v in metadata.properties.items() if isinstance(v, str)}
    properties[METADATA_LOCATION] = table.metadata_location
    return {"name": name, "table_type": "EXTERNAL", "data_source_format": "ICEBERG",
            "columns": columns_of(metadata.schema()), "storage_location": metadata.location,
            "properties": properties, "comment": properties.get("comment")}


# ---- AWS Glue ------------------------------------------------------------------------------

_HIVE_TYPES = {"boolean": "BOOLEAN", "tinyint": "BYTE", "smallint": "SHORT", "int": "INT", "integer": "INT",
               "bigint": "LONG", "float": "FLOAT", "double": "DOUBLE", "date": "DATE", "timestamp": "TIMESTAMP",
               "string": "STRING", "binary": "BINARY"}


def hive_columns(columns: list[dict]) -> list[dict]:
    """Hive-typed columns (Glue's and a metastore's: {Name, Type, Comment}) as ColumnInfo."""
    out = []
    for i, c in enumerate(columns):
        text = (c.get("Type") or "string").strip().lower()
        head = re.split(r"[<(]", text, 1)[0]
        type_name = {"decimal": "DECIMAL", "array": "ARRAY", "map": "MAP", "struct": "STRUCT", "varchar": "STRING",
                     "char": "STRING"}.get(head) or _HIVE_TYPES.get(head, "STRING")
        col = {"name": c.get("Name"), "type_name": type_name, "type_text": text, "position": i, "nullable": True}
        if type_name == "DECIMAL":
            numbers = [int(n) for n in re.findall(r"\d+", text)] or [10, 0]
            col["type_precision"], col["type_scale"] = numbers[0], (numbers[1] if len(numbers) > 1 else 0)
        if type_name in ("ARRAY", "MAP", "STRUCT"):
            col["type_json"] = json.dumps({"name": col["name"], "type": text, "nullable": True, "metadata": {}})
        if c.get("Comment"):
            col["comment"] = c["Comment"]
        out.append(col)
    return _columns(out)


class GlueSystem:
    """Options: `region`, `aws_access_key_id`, `aws_secret_access_key` (secret), `endpoint_url`
    (optional: another Glue endpoint, vetted like every address), `catalog_id` (optional)."""

    kind = "GLUE"

    def __init__(self, options: dict, catalog_options: dict, allowed):
        self.region = options.get("region") or "us-east-1"
        self.endpoint = http_url(options["endpoint_url"], "endpoint_url") if options.get("endpoint_url") else None
        self.keys = (options.get("aws_access_key_id"), options.get("aws_secret_access_key"))
        self.catalog_id = catalog_options.get("catalog_id") or options.get("catalog_id")
        self.allowed = allowed

    async def close(self) -> None:
        pass

    async def _client(self):
        import boto3
        from botocore.config import Config
        endpoint = None
        if self.endpoint is not None:
            endpoint = str((await pinned(self.endpoint, self.allowed))[0])
        else:       # AWS' own endpoint: public, vetted all the same
            await pinned(URL(f"https://glue.{self.region}.amazonaws.com"), self.allowed)
        return boto3.client("glue", region_name=self.region, endpoint_url=endpoint,
                            aws_access_key_id=self.keys[0], aws_secret_access_key=self.keys[1],
                            config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10))

    async def _run(self, fn, *args):
        return await threaded(fn, *args)

    def _ids(self) -> dict:
        return {"CatalogId": self.catalog_id} if self.catalog_id else {}

    async def schemas(self) -> list[dict]:
        client = await self._client()

        def run():
            out = []
            for page in client.get_paginator("get_databases").paginate(**self._ids()):
                out += [_schema(d["Name"], d.get("Description"), d.get("Parameters")) for d in page["DatabaseList"]]
            return out
        return await self._run(run)

    async def tables(self, schema: str) -> list[dict]:
        client = await self._client()

        def run():
            out = []
            try:
                for page in client.get_paginator("get_tables").paginate(DatabaseName=schema, **self._ids()):
                    out += [_glue_table(t) for t in page["TableList"]]
            except client.exceptions.EntityNotFoundException:
                return []
            return out
        return await self._run(run)

    async def table(self, schema: str, name: str) -> dict | None:
        client = await self._client()

        def run():
            try:
                return _glue_table(client.get_table(DatabaseName=schema, Name=name, **self._ids())["Table"])
            except client.exceptions.EntityNotFoundException:
                return None
        return await self._run(run)


def _glue_table(t: dict) -> dict:
    from ...iceberg.metadata import METADATA_LOCATION
    parameters = {k: v for k, v in (t.get("Parameters") or {}).items() if isinstance(v, str)}
    sd = t.get("StorageDescriptor") or {}
    columns = list(sd.get("Columns") or []) + list(t.get("PartitionKeys") or [])
    iceberg = parameters.get("table_type", "").upper() == "ICEBERG" and METADATA_LOCATION in parameters
    fmt = "ICEBERG" if iceberg else _format_of(sd, parameters)
    view = t.get("TableType") == "VIRTUAL_VIEW"
    return {"name": t["Name"], "table_type": "VIEW" if view else "EXTERNAL", "data_source_format": fmt,
            "columns": hive_columns(columns), "storage_location": sd.get("Location") or None,
            "view_definition": t.get("ViewOriginalText") if view else None, "comment": t.get("Description"),
            "properties": parameters}


def _format_of(sd: dict, parameters: dict) -> str | None:
    text = " ".join(str(x) for x in (sd.get("InputFormat"), (sd.get("SerdeInfo") or {}).get("SerializationLibrary"),
                                    parameters.get("classification"), parameters.get("spark.sql.sources.provider"))).lower()
    for word, fmt in (("delta", "DELTA"), ("parquet", "PARQUET"), ("orc", "ORC"), ("avro", "AVRO"), ("csv", "CSV"),
                      ("json", "JSON"), ("text", "TEXT")):
        if word in text:
            return fmt
    return None


# ---- a Hive metastore (Thrift) ---------------------------------------------------------------------


class HiveMetastoreSystem:
    """Options: `host`, `port` (9083). Spoken through hmsclient's Thrift client (PyPI), to the vetted
    address; nothing signs in (a metastore behind Kerberos is not reached)."""

    kind = "HIVE_METASTORE"

    def __init__(self, options: dict, catalog_options: dict, allowed):
        self.address = connection_address(self.kind, options)
        self.allowed = allowed

    async def close(self) -> None:
        pass

    async def _call(self, fn):
        target, _ = await pinned(self.address, self.allowed)

        def run():
            from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
            from hmsclient.genthrift.hive_metastore.ttypes import NoSuchObjectException
            from thrift.protocol import TBinaryProtocol
            from thrift.transport import TSocket, TTransport
            socket = TSocket.TSocket(target.raw_host, target.port)
            socket.setTimeout(TIMEOUT_SECONDS * 1000)
            transport = TTransport.TBufferedTransport(socket)
            transport.open()
            try:
                return fn(ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport)))
            except NoSuchObjectException:
                return None
            finally:
                transport.close()
        return await threaded(run)

    async def schemas(self) -> list[dict]:
        found = await self._call(lambda c: [c.get_database(n) for n in c.get_all_databases()])
        return [_schema(d.name, d.description, d.parameters) for d in found or []]

    # Hive 4 answers tables only to the request forms (get_table_req, get_table_objects_by_name_req).
    async def tables(self, schema: str) -> list[dict]:
        def run(c):
            from hmsclient.genthrift.hive_metastore.ttypes import GetTablesRequest
            names = c.get_all_tables(schema)
            return c.get_table_objects_by_name_req(GetTablesRequest(dbName=schema, tblNames=names)).tables if names else []
        found = await self._call(run)
        return [_hive_table(t) for t in found or [] if t is not None]

    async def table(self, schema: str, name: str) -> dict | None:
        def run(c):
            from hmsclient.genthrift.hive_metastore.ttypes import GetTableRequest
            return c.get_table_req(GetTableRequest(dbName=schema, tblName=name)).table
        found = await self._call(run)
        return _hive_table(found) if found is not None else None


def _hive_table(t) -> dict:
    """A metastore's Thrift Table as the Glue shape's fields (the same Hive model), then as a table."""
    sd = t.sd
    cols = [{"Name": c.name, "Type": c.type, "Comment": c.comment} for c in (sd.cols if sd else None) or []]
    keys = [{"Name": c.name, "Type": c.type, "Comment": c.comment} for c in t.partitionKeys or []]
    return _glue_table({
        "Name": t.tableName, "Parameters": t.parameters or {}, "PartitionKeys": keys,
        "TableType": t.tableType, "ViewOriginalText": t.viewOriginalText, "Description": (t.parameters or {}).get("comment"),
        "StorageDescriptor": {"Columns": cols, "Location": sd.location if sd else None,
                              "InputFormat": sd.inputFormat if sd else None,
                              "SerdeInfo": {"SerializationLibrary": sd.serdeInfo.serializationLib
                                            if sd and sd.serdeInfo else None}}})


SYSTEMS = {"UNITY_CATALOG": UnityCatalogSystem, "ICEBERG_REST": IcebergRestSystem, "GLUE": GlueSystem,
           "HIVE_METASTORE": HiveMetastoreSystem}


# ---- a connection's own options ----------------------------------------------------------------

def connection_address(connection_type: str, options: dict) -> URL | None:
    """The address a connection's options name (vetted at create, update and every use), its
    required options checked; None: the system's public default (Glue's AWS endpoint)."""
    if connection_type == "UNITY_CATALOG":
        return http_url(_option(options, "url", connection_type), "url")
    if connection_type == "ICEBERG_REST":
        return http_url(_option(options, "uri", connection_type), "uri")
    if connection_type == "GLUE":
        return http_url(options["endpoint_url"], "endpoint_url") if options.get("endpoint_url") else None
    host = _option(options, "host", connection_type)     # HIVE_METASTORE: a Thrift host and port
    port = options.get("port", "9083")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CatalogError("INVALID_PARAMETER_VALUE", "Option 'port' must be a TCP port number.")
    try:
        return URL.build(scheme="http", host=host, port=int(port))
    except (ValueError, TypeError):
        raise CatalogError("INVALID_PARAMETER_VALUE", "Option 'host' must be a host name or address.") from None
