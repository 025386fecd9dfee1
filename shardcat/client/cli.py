"""`shardcat catalog|schema|table|volume|model create|list|get|delete`, `shardcat search`,
`shardcat lineage`, `shardcat databases` and `shardcat move-metastore`: the client subcommands.

Each object kind is a REST collection described by a `Kind` (its path, list key, name depth,
list columns and create options); the four actions are the same generic REST calls for all of
them, so a kind the server adds later needs one more `Kind` here and nothing else. `search` and
`lineage` are read-only queries of shardcat's own endpoints, printed as tables too.
Output is an aligned table (lists) or a field/value listing (one object); `--json` prints
the server's JSON instead. Errors go to stderr with the server's error code; exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone

from .http import Client, ClientError, ServerError, resolve_config

MAX_PAGES = 10_000   # a guard against a server that never stops paging


@dataclass(frozen=True)
class Kind:
    name: str                     # the subcommand: catalog, schema, ...
    path: str                     # the REST collection: /catalogs, ...
    list_key: str                 # the list response's array field
    parts: tuple[str, ...]        # the parts of a full name, e.g. ("catalog", "schema", "table")
    columns: tuple[str, ...]      # list output columns
    has_force: bool = False       # delete takes force=true (cascade)

    @property
    def full_name_form(self) -> str:
        return ".".join(p.upper() for p in self.parts)


KINDS = {k.name: k for k in (
    Kind("catalog", "/catalogs", "catalogs", ("catalog",), ("name", "owner", "comment"), has_force=True),
    Kind("schema", "/schemas", "schemas", ("catalog", "schema"), ("full_name", "owner", "comment"), has_force=True),
    Kind("table", "/tables", "tables", ("catalog", "schema", "table"),
         ("full_name", "table_type", "data_source_format", "storage_location")),
    Kind("volume", "/volumes", "volumes", ("catalog", "schema", "volume"),
         ("full_name", "volume_type", "storage_location")),
    Kind("model", "/models", "registered_models", ("catalog", "schema", "model"),
         ("full_name", "owner", "comment"), has_force=True),
)}
PARENT_FIELDS = ("catalog_name", "schema_name")


# ---- argument parsing -------------------------------------------------------------


def add_connection_options(parser: argparse.ArgumentParser | None = None, *,
                           after_command: bool = False) -> argparse.ArgumentParser:
    """--server, --token and --json on `parser` (a new parent parser if none). The top-level parser
    has them with their defaults; a subcommand's copy sets them only when given (SUPPRESS), so
    `shardcat --json catalog list` and `shardcat catalog list --json` mean the same."""
    parser = argparse.ArgumentParser(add_help=False) if parser is None else parser
    unset = {"default": argparse.SUPPRESS} if after_command else {}
    parser.add_argument("--server", help="catalog URL (default $SHARDCAT_URL, else http://127.0.0.1:8080)", **unset)
    parser.add_argument("--token", help="bearer token (default $SHARDCAT_TOKEN, else ~/.shardcat/admin-token "
                                        "for a server on this machine)", **unset)
    parser.add_argument("--json", action="store_true", help="print the server's JSON", **unset)
    return parser


def add_client_commands(commands: argparse._SubParsersAction) -> None:
    """Add one subcommand per kind (with create/list/get/delete) to the top-level `shardcat` parser,
    whose own parser has add_connection_options."""
    common = add_connection_options(after_command=True)
    for kind in KINDS.values():
        parser = commands.add_parser(kind.name, help=f"create, list, get or delete {kind.name}s")
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,get,delete}")
        form = kind.full_name_form

        create = actions.add_parser("create", parents=[common], help=f"create a {kind.name}")
        create.add_argument("full_name", metavar=form)
        create.add_argument("--comment")
        create.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                            help="a property (repeatable)")
        _add_create_options(kind, create)
        create.add_argument("--field", action="append", default=[], metavar="KEY=VALUE",
                            help="any other request field; VALUE is JSON if it parses, else a string (repeatable)")

        listing = actions.add_parser("list", parents=[common], help=f"list {kind.name}s")
        if len(kind.parts) > 1:
            parent = ".".join(p.upper() for p in kind.parts[:-1])
            listing.add_argument("parent", metavar=parent, help=f"list the {kind.name}s in this {kind.parts[-2]}")
        listing.add_argument("--limit", type=_positive, help="show at most this many")

        get = actions.add_parser("get", parents=[common], help=f"show one {kind.name}")
        get.add_argument("full_name", metavar=form)

        delete = actions.add_parser("delete", parents=[common], help=f"delete a {kind.name}")
        delete.add_argument("full_name", metavar=form)
        if kind.has_force:
            delete.add_argument("--force", action="store_true", help="also delete everything inside it")
        parser.set_defaults(kind=kind.name)

    search = commands.add_parser("search", parents=[common], help="find securables by name or comment")
    search.add_argument("words", nargs="+", metavar="WORD", help="every word must be in the full name or comment")
    search.add_argument("--type", dest="securable_types", type=str.upper, metavar="TYPE[,TYPE...]",
                        help="CATALOG, SCHEMA, TABLE, VOLUME, FUNCTION, REGISTERED_MODEL (default all)")
    search.add_argument("--limit", type=_positive, default=50, help="show at most this many (default 50)")
    lineage = commands.add_parser("lineage", parents=[common], help="what a table or volume was written from "
                                                                     "and what was written from it")
    lineage.add_argument("full_name", metavar="CATALOG.SCHEMA.NAME")
    lineage.add_argument("--volume", action="store_true", help="the name is a volume's")
    lineage.add_argument("--direction", choices=("upstream", "downstream", "both"), default="both")
    lineage.add_argument("--depth", type=_positive, default=1, help="hops to follow (default 1, at most 10)")
    move = commands.add_parser("move-metastore", parents=[common],
                               help="move a metastore to another home database, online (docs/cluster.md)")
    move.add_argument("metastore", metavar="NAME", help="the metastore's name or id")
    move.add_argument("--to", required=True, metavar="DB", dest="database", help="the database's name (db1, ...)")
    commands.add_parser("databases", parents=[common], help="the PostgreSQL servers, their metastore counts and loads")


def _positive(text: str) -> int:
    if not text.isdecimal() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got '{text}'")
    return int(text)


def _add_create_options(kind: Kind, create: argparse.ArgumentParser) -> None:
    if kind.name in ("catalog", "schema"):
        create.add_argument("--storage-root", help="managed storage root URL")
    elif kind.name == "table":
        create.add_argument("--type", dest="table_type", type=str.upper,
                            help="MANAGED or EXTERNAL (default: EXTERNAL with --location, else MANAGED)")
        create.add_argument("--format", dest="data_source_format", type=str.upper, default="DELTA",
                            help="data source format (default DELTA)")
        create.add_argument("--location", help="storage location URL (EXTERNAL tables)")
        create.add_argument("--column", action="append", default=[], metavar="NAME:TYPE",
                            help="a column, e.g. id:LONG (repeatable, in order)")
    elif kind.name == "volume":
        create.add_argument("--type", dest="volume_type", type=str.upper,
                            help="MANAGED or EXTERNAL (default: EXTERNAL with --location, else MANAGED)")
        create.add_argument("--location", help="storage location URL (EXTERNAL volumes)")


# ---- requests ---------------------------------------------------------------------


class UsageError(ClientError):
    pass


def _split(kind: Kind, full_name: str) -> list[str]:
    parts = full_name.split(".")
    if len(parts) != len(kind.parts) or not all(parts):
        raise UsageError(f"a {kind.name} is named {kind.full_name_form}, got '{full_name}'")
    return parts


def _pairs(values: list[str], what: str) -> dict:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be KEY=VALUE, got '{value}'")
        out[key] = rest
    return out


def _columns(specs: list[str]) -> list[dict]:
    columns = []
    for position, spec in enumerate(specs):
        name, sep, type_name = spec.partition(":")
        if not sep or not name or not type_name:
            raise UsageError(f"--column must be NAME:TYPE (e.g. id:LONG), got '{spec}'")
        columns.append({"name": name, "type_name": type_name.upper(), "position": position, "nullable": True})
    return columns


def create_body(kind: Kind, args: argparse.Namespace) -> dict:
    parts = _split(kind, args.full_name)
    body: dict = {"name": parts[-1], **dict(zip(PARENT_FIELDS, parts[:-1]))}
    if args.comment is not None:
        body["comment"] = args.comment
    if args.property:
        body["properties"] = _pairs(args.property, "--property")
    if kind.name in ("catalog", "schema") and args.storage_root:
        body["storage_root"] = args.storage_root
    elif kind.name == "table":
        body["table_type"] = args.table_type or ("EXTERNAL" if args.location else "MANAGED")
        body["data_source_format"] = args.data_source_format
        body["columns"] = _columns(args.column)
        if args.location:
            body["storage_location"] = args.location
    elif kind.name == "volume":
        body["volume_type"] = args.volume_type or ("EXTERNAL" if args.location else "MANAGED")
        if args.location:
            body["storage_location"] = args.location
    for key, raw in _pairs(args.field, "--field").items():
        try:
            body[key] = json.loads(raw)
        except ValueError:
            body[key] = raw
    return body


def _item_path(kind: Kind, full_name: str) -> str:
    return f"{kind.path}/{urllib.parse.quote('.'.join(_split(kind, full_name)), safe='.')}"


def list_all(client: Client, kind: Kind, parent: str | None, limit: int | None,
             page_size: int | None = None) -> list[dict]:
    """Every item of a list, following next_page_token until the last page (or `limit` items)."""
    params = {}
    if parent is not None:
        names = parent.split(".")
        if len(names) != len(kind.parts) - 1 or not all(names):
            raise UsageError(f"{kind.name}s are listed in a {'.'.join(p.upper() for p in kind.parts[:-1])}, "
                             f"got '{parent}'")
        params = dict(zip(PARENT_FIELDS, names))
    items: list[dict] = []
    token = None
    for _ in range(MAX_PAGES):
        sizes = [n for n in (page_size, limit - len(items) if limit else None) if n]
        page = client.call("GET", kind.path, params={**params, "page_token": token,
                                                     "max_results": min(sizes) if sizes else None})
        items += page.get(kind.list_key) or []
        token = page.get("next_page_token")
        if not token or (limit and len(items) >= limit):
            break
    return items[:limit] if limit else items


def execute(client: Client, kind: Kind, args: argparse.Namespace) -> dict | list | None:
    """Run one action; the server's answer (a list of items for `list`, None for `delete`)."""
    if args.action == "create":
        return client.call("POST", kind.path, body=create_body(kind, args))
    if args.action == "list":
        return list_all(client, kind, getattr(args, "parent", None), args.limit)
    if args.action == "get":
        return client.call("GET", _item_path(kind, args.full_name))
    force = "true" if getattr(args, "force", False) else None
    client.call("DELETE", _item_path(kind, args.full_name), params={"force": force})
    return None


def search(client: Client, args: argparse.Namespace) -> list[dict]:
    """Up to --limit matches, best first, following pages (the server may return short ones)."""
    found: list[dict] = []
    token = None
    for _ in range(MAX_PAGES):
        page = client.call("GET", "/shardcat/search", params={
            "query": " ".join(args.words), "securable_types": args.securable_types, "page_token": token,
            "max_results": args.limit - len(found)})
        found += page.get("results") or []
        token = page.get("next_page_token")
        if not token or len(found) >= args.limit:
            break
    return found[:args.limit]


def lineage(client: Client, args: argparse.Namespace) -> dict:
    return client.call("GET", "/shardcat/lineage", params={
        "name": args.full_name, "securable_type": "VOLUME" if args.volume else "TABLE",
        "direction": args.direction, "depth": str(args.depth)})


def move_metastore(client: Client, args: argparse.Namespace) -> dict:
    return client.call("POST", f"/shardcat/metastores/{urllib.parse.quote(args.metastore, safe='')}/move",
                       body={"database": args.database})


def list_databases(client: Client, args: argparse.Namespace) -> list[dict]:
    return client.call("GET", "/shardcat/databases")["databases"]


def _lineage_rows(answer: dict) -> list[dict]:
    def name(node: dict) -> str:
        return node.get("full_name", "(hidden)") + (" (dropped)" if node.get("deleted") else "")
    return [{"direction": e["direction"], "hops": e["hops"], "source": name(e["source"]),
             "target": name(e["target"]), "runs": e["runs"], "last_at": e["last_at"],
             "jobs": ", ".join(e.get("jobs") or [])} for e in answer.get("edges", [])]


QUERIES = {  # command -> (run, JSON of the result, table rows of the result, table columns)
    "search": (search, lambda r: {"results": r}, lambda r: r, ("full_name", "securable_type", "match", "comment")),
    "lineage": (lineage, lambda r: r, _lineage_rows,
                ("direction", "hops", "source", "target", "runs", "last_at", "jobs")),
    "move-metastore": (move_metastore, lambda r: r, lambda r: [{"step": k, "value": v} for k, v in r.items()],
                       ("step", "value")),
    "databases": (list_databases, lambda r: {"databases": r}, lambda r: r,
                  ("name", "directory", "metastores", "load", "available")),
}


# ---- output -----------------------------------------------------------------------


def _cell(key: str, value) -> str:
    if value is None:
        return ""
    if key.endswith("_at") and isinstance(value, int) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if key == "columns" and isinstance(value, list):
        return ", ".join(f"{c.get('name')} {c.get('type_text') or c.get('type_name')}" for c in value
                         if isinstance(c, dict))
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def format_table(rows: list[dict], columns: tuple[str, ...]) -> str:
    """Aligned columns under upper-case headers."""
    cells = [[c.upper() for c in columns]] + [[_cell(c, row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def format_object(obj: dict) -> str:
    """One object as `field  value` lines, fields in the server's order."""
    if not obj:
        return ""
    width = max(len(k) for k in obj)
    return "\n".join(f"{k.ljust(width)}  {_cell(k, v)}".rstrip() for k, v in obj.items())


def run_client(args: argparse.Namespace) -> int:
    """Run a parsed client subcommand; the process exit status."""
    query = QUERIES.get(args.command)
    kind = None if query else KINDS[args.kind]
    try:
        client = Client(*resolve_config(args.server, args.token))
        result = query[0](client, args) if query else execute(client, kind, args)
    except ClientError as e:
        return report_error(e, kind, getattr(args, "action", None))
    if query:
        _, as_json, as_rows, columns = query
        print(json.dumps(as_json(result), indent=2) if args.json else format_table(as_rows(result), columns))
    elif args.json:
        if args.action == "list":
            result = {kind.list_key: result}
        print(json.dumps(result if result is not None else {}, indent=2, sort_keys=False))
    elif args.action == "list":
        print(format_table(result, kind.columns))
    elif args.action == "delete":
        print(f"Deleted {kind.name} '{args.full_name}'.")
    else:
        print(format_object(result))
    return 0


TOKEN_HINT = ("shardcat: pass a token with --token TOKEN or in $SHARDCAT_TOKEN; a server keeps an admin "
              "token in its data dir's admin-token file (~/.shardcat/admin-token by default), which this "
              "command reads itself for a server on this machine")


def report_error(error: ClientError, kind: Kind | None = None, action: str | None = None) -> int:
    """Say on stderr what went wrong, with a hint where one helps; the exit status 1."""
    if not isinstance(error, ServerError):
        print(f"shardcat: error: {error}", file=sys.stderr)
        return 1
    print(f"shardcat: error: {error.code} (HTTP {error.status}): {error.message}", file=sys.stderr)
    if error.status == 401:
        print(TOKEN_HINT, file=sys.stderr)
    elif kind and error.code in ("ENDPOINT_NOT_FOUND", "HTTP_404") and action in ("create", "list"):
        print(f"shardcat: this server does not serve {kind.path}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """The client subcommands on their own (the `shardcat` entry point also has them)."""
    parser = add_connection_options(argparse.ArgumentParser(prog="shardcat",
                                                            description="A client for a Unity Catalog server."))
    add_client_commands(parser.add_subparsers(dest="command", required=True))
    return run_client(parser.parse_args(argv))
