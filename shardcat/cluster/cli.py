"""The `shardcat` command line: `serve` runs the catalog, the other subcommands are its client.

Only light modules are imported up here: a client command must start at once, so the server
(Ray, pyiceberg, the aiohttp apps) is imported inside the serve path alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from ..client.cli import add_client_commands, add_connection_options, report_error, run_client
from ..client.http import Client, ClientError, resolve_config

if TYPE_CHECKING:
    from ..governance.oidc import OidcConfig
    from .server import ServeConfig

DRAIN_WAIT_SECONDS = 600.0
CLOSED_PIPE_STATUS = 141   # 128 + SIGPIPE: what a shell reports for a command whose reader went away


def main(argv: list[str] | None = None) -> int:
    try:
        status = run_command(build_parser().parse_args(argv))
        sys.stdout.flush()     # a reader that went away (`| head -1`) shows here rather than at exit
        return status
    except BrokenPipeError:
        # Nothing more can be said to the reader: end quietly, with stdout on /dev/null so that the
        # interpreter's own flush at exit cannot fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE_STATUS


def run_command(args: argparse.Namespace) -> int:
    if args.command == "rotate-secret-key":
        return rotate_secret_key(args)
    if args.command == "drain":
        return drain_node(args)
    if args.command != "serve":
        return run_client(args)
    return run_server(args)


def run_server(args: argparse.Namespace) -> int:
    """`shardcat serve`: the one place the server's modules are imported."""
    import asyncio
    import logging

    import uvloop

    from ..web import request_log
    from .server import serve_forever

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.request_log:
        request_log.turn_on()
    export_endpoint_lists(args)
    if args.event_loop == "asyncio":
        asyncio.run(serve_forever(serve_config(args)))
    else:
        uvloop.run(serve_forever(serve_config(args)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shardcat", description="A sharded Unity Catalog server and its client.")
    add_connection_options(parser)    # the client's --server, --token, --json, before the subcommand too
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the catalog server")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080; 0 picks a free one)")
    serve.add_argument("--data-dir", type=Path, default=Path.home() / ".shardcat",
                       help="where the admin token, embedded database and managed storage live (default ~/.shardcat)")
    serve.add_argument("--db", action="append", default=[], metavar="[NAME=]URL",
                       help="a PostgreSQL server, as URL or NAME=URL (unnamed: db0, db1, ... by position); repeat "
                            "for several: the first holds the account directory, each is the home database of "
                            "some metastores (docs/cluster.md). Without it an embedded server runs under the data dir")
    serve.add_argument("--db-file", type=Path, default=None, metavar="FILE",
                       help="the PostgreSQL servers, one [NAME=]URL a line (# comments), instead of --db")
    serve.add_argument("--shards", type=int, default=0,
                       help="run N shard actors on Ray behind a router (default 0: one in-process shard)")
    serve.add_argument("--shards-per-node", type=int, default=None, metavar="K",
                       help="at most K shards on each Ray node (with --shards), or K on every node (alone): "
                            "docs/cluster.md")
    serve.add_argument("--ray-address", default=None, help="join an existing Ray cluster (e.g. auto or ray://host:10001)")
    serve.add_argument("--no-cache", action="store_true",
                       help="serve every read from PostgreSQL (for comparison; the cache is on by default)")
    serve.add_argument("--no-group-commit", action="store_true",
                       help="one database transaction per metastore write (for comparison; writes queued behind "
                            "one in flight commit together by default)")
    serve.add_argument("--cache-mb", type=int, default=256, help="cache memory bound of a shard, its metastores together, in MiB")
    serve.add_argument("--path-index-max", type=int, default=None,
                       help="a metastore with more storage paths than this keeps its path index in PostgreSQL, "
                            "asked path by path with a bounded part in memory, instead of whole in memory "
                            "(default 250000)")
    serve.add_argument("--privileges-aside-above", type=int, default=None,
                       help="a cold owner of a metastore with more securables than this loads its whole privilege "
                            "index aside, deciding each request from the securables it asks about meanwhile "
                            "(default 100000)")
    serve.add_argument("--event-loop", choices=("uvloop", "asyncio"), default="uvloop",
                       help="the event loop of the server and of its shard actors: uvloop (default) or "
                            "asyncio's own, for comparison")
    serve.add_argument("--secret-key", default=None, metavar="SOURCE",
                       help="the keys that encrypt credential secrets: a key file's path, or env:NAME for an "
                            "environment variable (default: <data dir>/secret.key, created on first start)")
    serve.add_argument("--oidc-issuer", action="append", default=[], metavar="URL",
                       help="sign users in with this OIDC identity provider's tokens (repeat for several); "
                            "exactly the tokens' `iss` (docs/operations.md)")
    serve.add_argument("--oidc-audience", default=None,
                       help="the audience (client id) the identity provider's tokens must name")
    serve.add_argument("--oidc-jwks-url", default=None, metavar="URL",
                       help="the providers' JWKS (default: each issuer's discovery document's jwks_uri)")
    serve.add_argument("--oidc-claim", default="email",
                       help="the token claim naming the principal: matched to its e-mails or name, then `sub` "
                            "to its external id or name (default email)")
    serve.add_argument("--oidc-client-id", default=None,
                       help="the explorer's public client at the provider: the explorer then signs users in "
                            "through the provider's login (authorization code with PKCE)")
    serve.add_argument("--oidc-workspace", type=int, default=1,
                       help="the workspace users signed in through the provider act in (default 1)")
    serve.add_argument("--webhook-allow-host", action="append", default=[], metavar="HOST",
                       help="let webhooks reach HOST (as written in their URLs) although it is not a public "
                            "address, e.g. a receiver on loopback in tests (repeatable; docs/discovery.md)")
    serve.add_argument("--s3-compatible-endpoint", action="append", default=[], metavar="HOST[:PORT]",
                       help="let the catalog call an s3_compatible credential's endpoint on HOST (any port, or "
                            "PORT) although it is not a public address, e.g. a MinIO in the operator's own "
                            "network; added to $SHARDCAT_S3_COMPATIBLE_ENDPOINTS (repeatable; docs/storage.md)")
    serve.add_argument("--azure-storage-endpoint", action="append", default=[], metavar="URL",
                       help="let the catalog send Entra ID tokens to this blob endpoint (an Azure Stack's, an "
                            "emulator's); added to $SHARDCAT_AZURE_STORAGE_ENDPOINTS (repeatable; docs/storage.md)")
    serve.add_argument("--request-log", action="store_true",
                       help="one JSON line per request on stderr (request id, principal, operation, path, "
                            "status, latency, metastore; never tokens, queries or bodies): docs/operations.md")
    serve.add_argument("--log-level", default="INFO")
    rotate = commands.add_parser("rotate-secret-key",
                                 help="put a new key first in the secret key file; the next start re-encrypts "
                                      "every credential secret under it (docs/security.md)")
    rotate.add_argument("--data-dir", type=Path, default=Path.home() / ".shardcat",
                        help="the server's data dir, whose secret.key is rotated (default ~/.shardcat)")
    rotate.add_argument("--secret-key", default=None, metavar="FILE",
                        help="rotate this key file instead of the data dir's")
    drain = commands.add_parser("drain", parents=[add_connection_options(after_command=True)],
                                help="move every metastore off a Ray node and stop its shards, before "
                                     "the node stops (docs/cluster.md)")
    drain.add_argument("node", metavar="NODE", help="the Ray node id, or a unique prefix of it "
                                                    "(GET /shardcat/routing lists the nodes)")
    add_client_commands(commands)   # catalog|schema|table|volume|model create|list|get|delete
    return parser


def serve_config(args: argparse.Namespace) -> ServeConfig:
    from ..shards.group_commit import GroupCommitConfig
    from ..shards.shard import CacheConfig
    from ..store.databases import DatabaseConfigError, parse_databases, read_database_file
    from .server import ServeConfig

    if args.db and args.db_file:
        raise SystemExit("shardcat: give the databases with --db or with --db-file, not both")
    try:
        databases = read_database_file(args.db_file) if args.db_file else args.db
        parse_databases(databases)
    except (DatabaseConfigError, OSError) as e:
        raise SystemExit(f"shardcat: {e}") from None
    return ServeConfig(host=args.host, port=args.port, data_dir=args.data_dir,
                       db=databases[0] if len(databases) == 1 else databases or None,
                       shards=args.shards, shards_per_node=args.shards_per_node, ray_address=args.ray_address,
                       cache=CacheConfig(enabled=not args.no_cache, max_bytes=args.cache_mb << 20,
                                         **{key: value for key, value in (
                                             ("path_index_max", args.path_index_max),
                                             ("privileges_aside_above", args.privileges_aside_above))
                                            if value is not None}),
                       event_loop=args.event_loop, secret_key=args.secret_key, oidc=oidc_config(args),
                       group_commit=GroupCommitConfig(enabled=not args.no_group_commit),
                       webhook_allow_hosts=tuple(args.webhook_allow_host))


# `shardcat serve` options that add to an allow-list read from the environment (where shards and Ray
# workers started from this process find it): option -> variable.
ENDPOINT_LISTS = {"s3_compatible_endpoint": "SHARDCAT_S3_COMPATIBLE_ENDPOINTS",
                  "azure_storage_endpoint": "SHARDCAT_AZURE_STORAGE_ENDPOINTS"}


def export_endpoint_lists(args: argparse.Namespace) -> None:
    """Add the serve options' endpoints to their variables (comma-separated), keeping what the variables held."""
    for option, variable in ENDPOINT_LISTS.items():
        given = getattr(args, option, None) or []
        if given:
            held = [v for v in os.environ.get(variable, "").split(",") if v.strip()]
            os.environ[variable] = ",".join(held + [v.strip() for v in given])


def drain_node(args: argparse.Namespace) -> int:
    """`shardcat drain NODE`: the router's drain endpoint, which answers once the node runs no shard
    (its shards' replacements start first: that may take a minute)."""
    try:
        client = Client(*resolve_config(args.server, args.token), timeout=DRAIN_WAIT_SECONDS)
        result = client.call("POST", f"/shardcat/nodes/{urllib.parse.quote(args.node, safe='')}/drain")
    except ClientError as e:
        return report_error(e)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"node {result['node_id']} drained in {result.get('seconds')} s: shards stopped "
          f"{', '.join(result['shards_stopped']) or '(none)'}, {result.get('metastores_moved', 0)} metastore(s) moved")
    return 0


def oidc_config(args: argparse.Namespace) -> OidcConfig | None:
    from ..governance.oidc import OidcConfig

    if not args.oidc_issuer and not args.oidc_audience:
        return None
    if not args.oidc_issuer or not args.oidc_audience:
        raise SystemExit("shardcat: --oidc-issuer and --oidc-audience go together")
    return OidcConfig(tuple(args.oidc_issuer), args.oidc_audience, args.oidc_jwks_url, args.oidc_claim,
                      args.oidc_workspace, client_id=args.oidc_client_id)


def rotate_secret_key(args: argparse.Namespace) -> int:
    """A new key first in the key file, the old ones kept after it to decrypt until the next start
    has re-encrypted every secret (then they may be deleted from the file)."""
    from ..store.sealing import key_file_of, rotate_key_file

    if args.secret_key is not None and args.secret_key.startswith("env:"):
        print("shardcat: keys from an environment variable are rotated where it is set: put a new key "
              "(Fernet.generate_key()) first in its value, restart, then drop the old one")
        return 2
    path = key_file_of(args.data_dir.expanduser(), args.secret_key)
    if not path.exists():
        print(f"shardcat: no secret key file at {path} (a server's first start creates it)")
        return 2
    rotate_key_file(path)
    print(f"a new secret key is first in {path}; restart the server to re-encrypt every credential secret "
          "under it, then the old key lines may be deleted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
