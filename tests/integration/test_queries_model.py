"""Path queries against a model, on random trees (hypothesis): catalogs, schemas, tables and views,
columns, tags, owners (users and groups) and grants, written in one metastore write; random queries
through the server (POST /shardcat/query, small pages) must answer what a simple evaluator written
here answers, for an admin and for a restricted user (whose view of the tree the model derives from
the grants by the documented rules, independently of governance/authorize.py), so a query never
returns, and no filter reveals, what that user may not see. Pages are small (max_results, and
sometimes a tiny max_nodes: pages ended by the bound on work). A write between a query's pages
leaves its later pages as they were (the token pins the version); the next query sees it."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import uuid

from governance_users import unique, user
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import new_workspace
from shardcat.entities.asset import Asset
from shardcat.entities.values import now_ms
from shardcat.web.wire import MIN_VERSION_HEADER

CATALOGS, SCHEMAS, TABLES, COLUMNS = ("a", "b", "c"), ("s", "t"), ("x", "y", "z"), ("id", "email", "n")
OWNERS = ("U", "G", "O", "A")        # the restricted user, its group, another group, the admin
KIND_OF = {"U": "user", "G": "group", "O": "group", "A": "user"}
PRIVILEGES = {"catalog": ("USE CATALOG", "USE SCHEMA", "SELECT", "BROWSE", "ALL PRIVILEGES", "MANAGE"),
              "schema": ("USE SCHEMA", "SELECT", "BROWSE", "ALL PRIVILEGES", "MODIFY"),
              "table": ("SELECT", "BROWSE", "MODIFY", "ALL PRIVILEGES")}
READ = {"catalog": ("USE CATALOG", "BROWSE"), "schema": ("USE SCHEMA", "BROWSE"), "table": ("SELECT", "BROWSE")}
PHASES = (Phase.generate,) if os.environ.get("SHARDCAT_QUERY_NO_SHRINK") else tuple(Phase)
EXAMPLES = int(os.environ.get("SHARDCAT_QUERY_EXAMPLES", 25))

# ---- random trees ---------------------------------------------------------------------------------

tags = st.dictionaries(st.sampled_from(("pii", "tier")), st.sampled_from((None, "v1")), max_size=2)


def grants(kind):
    return st.dictionaries(st.sampled_from(("U", "G", "O")), st.frozensets(st.sampled_from(PRIVILEGES[kind]),
                                                                           min_size=1, max_size=2), max_size=2)


column = st.fixed_dictionaries({"name": st.sampled_from(COLUMNS), "tags": tags,
                                "comment": st.sampled_from((None, "note"))})
table = st.fixed_dictionaries({
    "owner": st.sampled_from(OWNERS), "view": st.booleans(), "comment": st.sampled_from((None, "about")),
    "tags": tags, "grants": grants("table"),
    "columns": st.lists(column, min_size=1, max_size=3, unique_by=lambda c: c["name"])})
schema = st.fixed_dictionaries({"owner": st.sampled_from(OWNERS), "comment": st.sampled_from((None, "about")),
                                "tags": tags, "grants": grants("schema"),
                                "tables": st.dictionaries(st.sampled_from(TABLES), table, min_size=1, max_size=3)})
catalog = st.fixed_dictionaries({"owner": st.sampled_from(OWNERS), "comment": st.sampled_from((None, "about")),
                                 "tags": tags, "grants": grants("catalog"),
                                 "schemas": st.dictionaries(st.sampled_from(SCHEMAS), schema, min_size=1, max_size=2)})
trees = st.dictionaries(st.sampled_from(CATALOGS), catalog, min_size=1, max_size=3)

# ---- random queries: an AST the model evaluates and a renderer to the language --------------------

P = {"catalog": ("schema",), "schema": ("table|view",), "table|view": ("column",), "table": ("column",),
     "view": ("column",), "*": ("column",), "column": ()}


@functools.lru_cache(maxsize=None)
def preds(kind: str, depth: int = 0):
    """Conditions on a node of `kind` as ("op", ...) tuples."""
    asset = kind != "column"
    names = {"catalog": CATALOGS, "schema": SCHEMAS, "column": COLUMNS}.get(kind, TABLES)
    leaves = [st.tuples(st.just("name"), st.sampled_from(names)),
              st.tuples(st.just("comment")), st.tuples(st.just("tag"), st.sampled_from(("pii", "tier"))),
              st.tuples(st.just("tag="), st.sampled_from(("pii", "tier")), st.sampled_from((None, "v1")))]
    if asset:
        leaves += [st.tuples(st.just("owner"), st.sampled_from(OWNERS)),
                   st.tuples(st.just("owner_kind"), st.sampled_from(("user", "group"))),
                   st.tuples(st.just("grant"), st.sampled_from(("U", "G", "O", None)),
                             st.sampled_from(("SELECT", "USE SCHEMA", "ALL PRIVILEGES", None)))]
    base = st.one_of(*leaves)
    if depth >= 2:
        return base
    inner = preds(kind, depth + 1)
    sub = [st.tuples(st.just("not"), inner), st.tuples(st.sampled_from(("and", "or")), inner, inner)]
    for child in P.get(kind, ()):
        sub.append(st.tuples(st.just("exists"), st.just(child), st.one_of(st.none(), preds(_one(child), depth + 1))))
    return st.one_of(base, *sub)


def _one(kinds: str) -> str:
    return "table" if kinds in ("table|view", "*") else kinds


@st.composite
def queries(draw):
    depth = draw(st.integers(1, 4))
    level3 = draw(st.sampled_from(("table", "view", "table|view", "*")))
    kinds = ["catalog", "schema", level3, "column"][:depth]
    # filters above the last step are rarer, so that deep queries find something often enough
    return [(k, draw(st.one_of(st.none(), *([st.none()] if i < depth - 1 else []), preds(_one(k) if k != "view" else "view"))))
            for i, k in enumerate(kinds)]


def render(p, names: dict) -> str:
    op = p[0]
    if op == "name":
        return f'name = "{p[1]}"'
    if op == "comment":
        return "comment"
    if op == "tag":
        return f'tags["{p[1]}"]'
    if op == "tag=":
        return f'tags["{p[1]}"] = ' + ("null" if p[2] is None else f'"{p[2]}"')
    if op == "owner":
        return f'owner = "{names[p[1]]}"'
    if op == "owner_kind":
        return f'owner_kind = "{p[1]}"'
    if op == "grant":
        parts = ([f'principal = "{names[p[1]]}"'] if p[1] else []) + ([f'privilege = "{p[2]}"'] if p[2] else [])
        return "exists(grant" + (f"[{' and '.join(parts)}]" if parts else "") + ")"
    if op == "not":
        return f"not ({render(p[1], names)})"
    if op in ("and", "or"):
        return f"({render(p[1], names)}) {op} ({render(p[2], names)})"
    if op == "exists":
        return f"exists({p[1]}" + (f"[{render(p[2], names)}]" if p[2] is not None else "") + ")"
    raise AssertionError(p)


def render_query(query, names) -> str:
    return "".join(f"/{k}" + (f"[{render(p, names)}]" if p is not None else "") for k, p in query)

# ---- the model ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class Node:
    kind: str               # catalog schema table view column
    name: str
    full_name: str
    info: dict
    parent: "Node | None"
    children: list
    index: int = 0


def build(tree) -> list[Node]:
    out = []
    for cn in sorted(tree):
        c = tree[cn]
        cat = Node("catalog", cn, cn, c, None, [])
        out.append(cat)
        for sn in sorted(c["schemas"]):
            s = c["schemas"][sn]
            sch = Node("schema", sn, f"{cn}.{sn}", s, cat, [])
            cat.children.append(sch)
            for tn in sorted(s["tables"]):
                t = s["tables"][tn]
                tab = Node("view" if t["view"] else "table", tn, f"{cn}.{sn}.{tn}", t, sch, [])
                sch.children.append(tab)
                for i, col in enumerate(t["columns"]):
                    tab.children.append(Node("column", col["name"], f"{tab.full_name}.{col['name']}", col, tab, [], i))
    return out


class Model:
    """What a caller holding `principals` sees (None: an admin), by the documented rules."""

    def __init__(self, roots: list[Node], principals: set[str] | None):
        self.roots, self.p = roots, principals

    def owned(self, n) -> bool:
        return n.info["owner"] in self.p

    def has(self, n, privilege) -> bool:
        return any(privilege in privs or ("ALL PRIVILEGES" in privs and privilege != "MANAGE")
                   for who, privs in n.info["grants"].items() if who in self.p)

    def any_grant(self, n) -> bool:
        return any(who in self.p for who in n.info["grants"])

    def chain(self, n):
        while n is not None:
            yield n
            n = n.parent

    def level(self, n) -> str:
        return "table" if n.kind in ("table", "view") else n.kind

    def marked(self, n, level) -> bool:
        """Owner, MANAGE, or a read privilege of `level` assets, held on n itself."""
        return self.owned(n) or self.has(n, "MANAGE") or any(self.has(n, r) for r in READ[level])

    def uses(self, container) -> bool:
        privilege = "USE CATALOG" if container.kind == "catalog" else "USE SCHEMA"
        return any(self.owned(m) or self.has(m, privilege) for m in self.chain(container))

    def below_marked(self, n) -> bool:
        return any(self.any_grant(d) or self.owned(d) or self.below_marked(d)
                   for d in n.children if d.kind != "column")

    def visible(self, n) -> bool:
        if self.p is None or n.kind == "column":
            return True
        above = list(self.chain(n.parent)) if n.parent is not None else []
        if not all(self.uses(m) for m in above):
            return False
        level = self.level(n)
        if any(self.marked(m, level) for m in self.chain(n)):
            return True
        return n.kind in ("catalog", "schema") and self.below_marked(n)

    def readable(self, n) -> bool:
        """May read the asset (what showing its grants needs)."""
        if self.p is None:
            return True
        above = list(self.chain(n.parent)) if n.parent is not None else []
        level = self.level(n)
        return all(self.uses(m) for m in above) and any(self.marked(m, level) for m in self.chain(n))

    def kids(self, n, kinds: str):
        pool = self.roots if n is None else n.children
        want = {"table|view": ("table", "view"), "*": ("table", "view")}.get(kinds, (kinds,))
        return [k for k in pool if k.kind in want and self.visible(k)]

    def holds(self, n, p, names) -> bool:
        op = p[0]
        if op == "name":
            return n.name == p[1]
        if op == "comment":
            return bool(n.info.get("comment"))
        if op == "tag":
            return p[1] in n.info["tags"]
        if op == "tag=":
            return n.info["tags"].get(p[1]) == p[2]
        if op == "owner":
            return n.info["owner"] == p[1]
        if op == "owner_kind":
            return KIND_OF[n.info["owner"]] == p[1]
        if op == "grant":
            if not self.readable(n):
                return False
            return any((p[1] is None or who == p[1]) and (p[2] is None or p[2] in privs)
                       for who, privs in n.info["grants"].items())
        if op == "not":
            return not self.holds(n, p[1], names)
        if op == "and":
            return self.holds(n, p[1], names) and self.holds(n, p[2], names)
        if op == "or":
            return self.holds(n, p[1], names) or self.holds(n, p[2], names)
        if op == "exists":
            return any(p[2] is None or self.holds(k, p[2], names) for k in self.kids(n, p[1]))
        raise AssertionError(p)

    def answer(self, query, names) -> list[str]:
        out = []

        def walk(n, i):
            for k in self.kids(n, query[i][0]):
                if query[i][1] is None or self.holds(k, query[i][1], names):
                    if i == len(query) - 1:
                        out.append(k.full_name)
                    else:
                        walk(k, i + 1)
        walk(None, 0)
        return out

# ---- writing a tree ---------------------------------------------------------------------------------


def assets(ms: str, tree, names: dict, ids: dict) -> tuple[list[Asset], dict]:
    """The tree as assets (ids kept in `ids` by full name, so a second write updates them) and grants."""
    out, held = [], {}
    now = now_ms()

    def make(kind, parent_id, name, full, node, **info):
        i = ids.setdefault(full, str(uuid.uuid4()))
        base = {"name": name, "owner": names[node["owner"]], "created_at": now, "created_by": names["A"],
                "updated_at": now, "updated_by": names["A"], **info}
        if node.get("comment"):
            base["comment"] = node["comment"]
        if node["tags"]:
            base["tags"] = dict(node["tags"])
        out.append(Asset(i, ms, kind, kind, parent_id, name, full, None, base))
        held[i] = {names[w]: set(p) for w, p in node["grants"].items()}
        return i

    for cn, c in tree.items():
        cid = make("catalog", ms, cn, cn, c)
        for sn, s in c["schemas"].items():
            sid = make("schema", cid, sn, f"{cn}.{sn}", s, catalog_name=cn)
            for tn, t in s["tables"].items():
                columns = [{"name": col["name"], "type_name": "STRING", "position": i,
                            **({"comment": col["comment"]} if col["comment"] else {}),
                            **({"tags": dict(col["tags"])} if col["tags"] else {})}
                           for i, col in enumerate(t["columns"])]
                make("table", sid, tn, f"{cn}.{sn}.{tn}", t, catalog_name=cn, schema_name=sn,
                     table_type="VIEW" if t["view"] else "MANAGED", columns=columns,
                     **({} if t["view"] else {"data_source_format": "DELTA"}))
    return out, held


async def write(server, ws, version: int, tree, names, ids) -> None:
    made, held = assets(ws.metastore_id, tree, names, ids)
    async with server.store.write(ws.metastore_id, version) as tx:
        for a in made:
            await tx.put(a)
        for sid, g in held.items():
            await tx.set_grants(sid, g, is_asset=True, granted_by="admin", at=now_ms())


def changed(tree):
    """The second write: every table commented, and a catalog `zz` owned by the restricted user."""
    out = {cn: {**c, "schemas": {sn: {**s, "tables": {tn: {**t, "comment": "changed"} for tn, t in s["tables"].items()}}
                                 for sn, s in c["schemas"].items()}} for cn, c in tree.items()}
    out["zz"] = {"owner": "U", "comment": None, "tags": {}, "grants": {}, "schemas": {"s": {
        "owner": "U", "comment": None, "tags": {}, "grants": {}, "tables": {"x": {
            "owner": "U", "view": False, "comment": None, "tags": {"pii": None}, "grants": {}, "columns": []}}}}}
    return out


async def pages(caller, q: str, size: int, nodes: int | None, at_least: list, between=None) -> list[str]:
    """Every page's results; the writes go round the server's shard (another owner's, as it were):
    the requests ask to read at least their version, as a client that saw them acknowledged does."""
    out, token, first = [], None, True
    for _ in range(200):
        status, body = await caller.call("POST", "/shardcat/query", json={
            "query": q, "max_results": size, **({"max_nodes": nodes} if nodes else {}),
            **({"page_token": token} if token else {})},
            headers={MIN_VERSION_HEADER: str(at_least[0])})
        assert status == 200, (q, body)
        out += [r["full_name"] for r in body["results"]]
        token = body.get("next_page_token")
        if first and between is not None:
            await between()
        first = False
        if token is None:
            return out
    raise AssertionError("too many pages")


async def scenario(server, http, tmp_path, tree, qs, size, nodes):
    ws = await new_workspace(server, http, tmp_path)
    g, o = unique("g"), unique("o")
    await server.store.create_principal(g, "group")
    await server.store.create_principal(o, "group")
    restricted = await user(server, ws, groups=[g])
    names = {"U": restricted.name, "G": g, "O": o, "A": "admin"}
    ids: dict = {}
    await write(server, ws, 0, tree, names, ids)
    current, later = tree, changed(tree)

    at_least = [1]

    async def mutate():
        await write(server, ws, 1, later, names, ids)
        at_least[0] = 2

    for i, query in enumerate(qs):
        text = render_query(query, names)
        for caller, principals in ((ws, None), (restricted, {"U", "G"})):
            expected = Model(build(current), principals).answer(query, names)
            first_of_all = i == 0 and caller is ws
            got = await pages(caller, text, size, nodes, at_least, mutate if first_of_all else None)
            assert got == expected, (text, "admin" if caller is ws else "restricted", current)
            if first_of_all:            # its pages read the first write's tree; everything after, the second's
                current = later


async def test_queries_answer_as_a_model_does_on_random_trees_for_an_admin_and_a_restricted_user(server, http,
                                                                                                  tmp_path):
    loop = asyncio.get_running_loop()

    @settings(max_examples=EXAMPLES, database=None, deadline=None, suppress_health_check=list(HealthCheck),
              phases=PHASES)
    @given(tree=trees, qs=st.lists(queries(), min_size=3, max_size=3), size=st.integers(1, 4),
           nodes=st.sampled_from((None, None, 2, 7)))
    def check(tree, qs, size, nodes):
        asyncio.run_coroutine_threadsafe(scenario(server, http, tmp_path, tree, qs, size, nodes), loop).result(120)

    await asyncio.to_thread(check)
