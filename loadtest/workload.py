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

import math
import random
from collections import deque
from dataclasses import dataclass, field

PREFIX = "/api/2.1/unity-catalog"
CATALOG = "main"
LOAD_SCHEMA = "load"              # where load clients create, alter and drop their own tables
TABLES_PER_SCHEMA = 1000

# op -> percent of requests. Reads first, then writes. Grants/permission checks and Delta commits
# join here (and in `request_for`) once their APIs exist; PENDING keeps their intended share.
MIX: dict[str, float] = {
    "getTable": 44.0,
    "resolve": 16.0,           # batched resolve: the Spark driver's one call per query
    "getSchema": 16.0,
    "listTables": 12.0,
    "getCatalog": 6.0,
    "listSchemas": 4.0,
    "createTable": 0.8,
    "alterTable": 0.7,
    "dropTable": 0.5,
}
WRITES = frozenset({"createTable", "alterTable", "dropTable"})
PENDING: dict[str, float] = {  # not in the mix yet: their APIs are other issues
    "getPermissions": 0.0, "updatePermissions": 0.0, "deltaCommit": 0.0,
}


@dataclass(frozen=True)
class Metastore:
    """One seeded metastore: tables t000000.. spread over schemas s000.. of TABLES_PER_SCHEMA each."""
    id: str
    token: str
    tables: int

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

    def __post_init__(self):
        self._ops = list(MIX)
        self._op_weights = list(MIX.values())
        # Busier metastores are the bigger ones, less than proportionally.
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
