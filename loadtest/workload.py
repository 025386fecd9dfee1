"""The workload, defined in one place: the request mix, the metastore population, and temporal locality.

Pure: no I/O. Both load drivers (Locust in locustfile.py, the asyncio loop in driver.py)
draw their requests from here, so a change to the mix changes every run.

Shaped like the Unity Catalog paper (seeds/000_*.txt, sections 4.5 and 6):
- ~98% reads, ~2% writes (98.2% / ~2% in production);
- metastores of heavy-tailed sizes: most with a few dozen tables, a few with 100,000;
- temporal locality (its figure 5): 90% of containers (schemas) are accessed again within
  10 s, 90% of tables within 100 s. A client works on one metastore for a while and mostly
  comes back to tables it touched recently; otherwise popularity is Zipf-like.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections import deque
from dataclasses import dataclass, field

PREFIX = "/api/2.1/unity-catalog"
CATALOG = "main"
LOAD_SCHEMA = "load"              # where load clients create, alter and drop their own tables
TABLES_PER_SCHEMA = 1000

# op -> percent of requests. Reads first, then writes (~98% / 2%, as in the paper).
MIX: dict[str, float] = {
    "getTable": 40.0,
    "resolve": 15.0,           # batched resolve: the Spark driver's one call per query
    "getSchema": 14.0,
    "listTables": 11.0,
    "getCatalog": 6.0,
    "listSchemas": 4.0,
    "getPermissions": 4.0,     # GET /permissions/table/{name}
    "authorize": 4.0,          # POST /shardcat/authorize: another service asks "may P read these tables?"
    "createTable": 0.6,
    "alterTable": 0.5,
    "dropTable": 0.4,
    "updatePermissions": 0.3,  # grant or revoke SELECT on a seeded table to a seeded principal
    "deltaCommit": 0.2,        # ratify version latest+1 of the metastore's catalog-managed Delta table
}
WRITES = frozenset({"createTable", "alterTable", "dropTable", "updatePermissions", "deltaCommit"})
PRINCIPALS = tuple(f"loadtest_reader_{i}" for i in range(4))   # seeded users that grants name
DELTA_TABLE = "delta_commits"     # the catalog-managed Delta table seeded in each metastore's `load` schema
DELTA_KEEP_UNPUBLISHED = 10       # commits report versions older than this as published (limit is 50)


@dataclass(frozen=True)
class Metastore:
    """One seeded metastore: tables t000000.. spread over schemas s000.. of TABLES_PER_SCHEMA each."""
    id: str
    token: str
    tables: int
    delta_table_id: str = ""      # its catalog-managed Delta table ("" in populations seeded without one)
    delta_table_uri: str = ""

    @property
    def schemas(self) -> int:
        return max(1, math.ceil(self.tables / TABLES_PER_SCHEMA))


def table_name(i: int) -> tuple[str, str]:
    """(schema, table) of the i-th seeded table of a metastore."""
    return f"s{i // TABLES_PER_SCHEMA:03d}", f"t{i:06d}"


def metastore_sizes(count: int, *, typical: int = 30, max_tables: int = 100_000, seed: int = 7) -> list[int]:
    """Heavy-tailed table counts: Pareto(alpha 1.1) with median `typical`, the largest 1% at `max_tables`."""
    rng = random.Random(seed)
    alpha = 1.1
    scale = typical / 2 ** (1 / alpha)
    sizes = [max(1, min(max_tables, int(scale * (1 - rng.random()) ** (-1 / alpha)))) for _ in range(count)]
    sizes.sort(reverse=True)
    for i in range(max(1, count // 100) if count else 0):
        sizes[i] = max_tables
    return sizes


@dataclass
class Request:
    op: str
    method: str
    path: str
    params: dict | None = None
    json: dict | None = None
    table: str | None = None     # the full name a table op targets (for the invariant ledger)

    @property
    def is_write(self) -> bool:
        return self.op in WRITES


def zipf_weights(n: int, exponent: float, seed: int = 11) -> list[float]:
    """Weights of `n` items by Zipf's law: the item of popularity rank k (0 the hottest) weighs
    1 / (k + 1) ** exponent. The ranks are dealt to the items in a fixed random order (`seed`),
    so popularity is not the items' own order (a population is listed largest first)."""
    ranks = list(range(n))
    random.Random(seed).shuffle(ranks)
    return [1.0 / (rank + 1) ** exponent for rank in ranks]


def _log_uniform(rng: random.Random, n: int) -> int:
    """A rank in [0, n) with P(k) roughly proportional to 1/(k+1): Zipf(1) in O(1)."""
    return min(n - 1, int((n + 1) ** rng.random()) - 1)


def _scatter(rank: int, n: int) -> int:
    """Spread popular ranks over all schemas (a fixed permutation of [0, n))."""
    step = 7919 if n % 7919 else 7907
    return (rank * step) % n


@dataclass
class Chooser:
    """One client's choices: which metastore, which op, which table, with temporal locality."""
    metastores: list[Metastore]
    rng: random.Random
    session_length: int = 40        # mean requests on one metastore before moving on
    reuse: float = 0.8              # chance a table access goes back to a recently touched table
    current: Metastore | None = None
    left: int = 0
    recent: dict[str, deque] = field(default_factory=dict)
    zipf: float | None = None       # metastore popularity by Zipf's law with this exponent (zipf_weights)

    def __post_init__(self):
        self._ops = list(MIX)
        self._op_weights = list(MIX.values())
        if self.zipf is not None:
            self._ms_weights = zipf_weights(len(self.metastores), self.zipf)
        else:   # busier metastores are the bigger ones, less than proportionally
            self._ms_weights = [m.tables ** 0.5 for m in self.metastores]

    def metastore(self) -> Metastore:
        if self.current is None or self.left <= 0:
            self.current = self.rng.choices(self.metastores, self._ms_weights)[0]
            self.left = max(1, int(self.rng.expovariate(1 / self.session_length)))
        self.left -= 1
        return self.current

    def op(self) -> str:
        return self.rng.choices(self._ops, self._op_weights)[0]

    def table(self, ms: Metastore) -> int:
        recent = self.recent.setdefault(ms.id, deque(maxlen=64))
        if recent and self.rng.random() < self.reuse:
            i = recent[-1 - min(len(recent) - 1, int(self.rng.expovariate(0.25)))]
        else:
            i = _scatter(_log_uniform(self.rng, ms.tables), ms.tables)
        recent.append(i)
        return i


def read_request(op: str, ms: Metastore, chooser: Chooser) -> Request:
    """A read of seeded assets (tables chosen with locality)."""
    schema, table = table_name(chooser.table(ms))
    full = f"{CATALOG}.{schema}.{table}"
    if op == "getTable":
        return Request(op, "GET", f"{PREFIX}/tables/{full}", table=full)
    if op == "resolve":
        items = [{"name": f"{CATALOG}.{'.'.join(table_name(chooser.table(ms)))}", "operation": "READ"}
                 for _ in range(1 + int(chooser.rng.expovariate(1 / 3)) % 8)]
        items.append({"name": full, "operation": "READ"})
        return Request(op, "POST", f"{PREFIX}/resolve", json={"items": items})
    if op == "getSchema":
        return Request(op, "GET", f"{PREFIX}/schemas/{CATALOG}.{schema}")
    if op == "listTables":
        return Request(op, "GET", f"{PREFIX}/tables",
                       params={"catalog_name": CATALOG, "schema_name": schema, "max_results": "100"})
    if op == "getCatalog":
        return Request(op, "GET", f"{PREFIX}/catalogs/{CATALOG}")
    if op == "listSchemas":
        return Request(op, "GET", f"{PREFIX}/schemas", params={"catalog_name": CATALOG, "max_results": "100"})
    if op == "getPermissions":
        return Request(op, "GET", f"{PREFIX}/permissions/table/{full}", table=full)
    if op == "authorize":
        items = [{"securable_type": "table", "full_name": f"{CATALOG}.{'.'.join(table_name(chooser.table(ms)))}",
                  "privilege": "SELECT"} for _ in range(int(chooser.rng.expovariate(1 / 2)) % 8)]
        items.append({"securable_type": "table", "full_name": full, "privilege": "SELECT"})
        return Request(op, "POST", f"{PREFIX}/shardcat/authorize",
                       json={"principal": chooser.rng.choice(PRINCIPALS), "items": items})
    raise ValueError(op)


COLUMNS = [{"name": "id", "type_name": "LONG", "type_text": "bigint", "type_json": '{"type":"long"}',
            "position": 0, "nullable": False},
           {"name": "v", "type_name": "STRING", "type_text": "string", "type_json": '{"type":"string"}',
            "position": 1, "nullable": True}]


def create_request(name: str) -> Request:
    full = f"{CATALOG}.{LOAD_SCHEMA}.{name}"
    return Request("createTable", "POST", f"{PREFIX}/tables", table=full, json={
        "name": name, "catalog_name": CATALOG, "schema_name": LOAD_SCHEMA, "table_type": "MANAGED",
        "data_source_format": "DELTA", "columns": COLUMNS})


def alter_request(full: str, comment: str) -> Request:
    return Request("alterTable", "PATCH", f"{PREFIX}/tables/{full}", table=full, json={"comment": comment})


def drop_request(full: str) -> Request:
    return Request("dropTable", "DELETE", f"{PREFIX}/tables/{full}", table=full)


def grant_request(full: str, principal: str, grant: bool) -> Request:
    """Grant (or revoke) SELECT on a table to a principal."""
    change = {"principal": principal, "add" if grant else "remove": ["SELECT"]}
    return Request("updatePermissions", "PATCH", f"{PREFIX}/permissions/table/{full}", table=full,
                   json={"changes": [change]})


def grant_target(ms: Metastore, chooser: Chooser) -> tuple[str, str, bool]:
    """(seeded table, principal, grant or revoke) of one permissions change."""
    full = f"{CATALOG}.{'.'.join(table_name(chooser.table(ms)))}"
    return full, chooser.rng.choice(PRINCIPALS), chooser.rng.random() < 0.5


def commit_request(ms: Metastore, version: int, writer: str) -> Request:
    """An inline commit (no files) proposing `version` of the metastore's catalog-managed table. It
    reports older versions published, so the unpublished window stays below the server's limit."""
    ts = 1_700_000_000_000 + version
    content = json.dumps({"commitInfo": {"timestamp": ts, "inCommitTimestamp": ts, "operation": "WRITE",
                                         "engineInfo": f"shardcat-loadtest/{writer}",
                                         "txnId": str(uuid.uuid4())}}) + "\n"
    body = {"table_id": ms.delta_table_id, "table_uri": ms.delta_table_uri,
            "commit_info": {"version": version, "timestamp": ts, "file_name": f"{version:020d}.{uuid.uuid4()}.json",
                            "file_size": len(content.encode()), "file_modification_timestamp": ts,
                            "inline_content": content}}
    if version > DELTA_KEEP_UNPUBLISHED:
        body["latest_backfilled_version"] = version - DELTA_KEEP_UNPUBLISHED
    return Request("deltaCommit", "POST", f"{PREFIX}/delta/preview/commits", json=body)


def get_commits_request(ms: Metastore, start_version: int = 0) -> Request:
    """The table's unpublished commits from `start_version` and its latest version (query parameters)."""
    return Request("getCommits", "GET", f"{PREFIX}/delta/preview/commits", params={
        "table_id": ms.delta_table_id, "table_uri": ms.delta_table_uri, "start_version": str(start_version)})
