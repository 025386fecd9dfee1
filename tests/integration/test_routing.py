"""The routing table's failover: a dead shard's metastores go to the survivors in one move."""

from __future__ import annotations

import uuid

from shardcat.router.routing import RoutingTable, ShardHandle
from shardcat.store.db import Store


class FakeActor:
    """Stands in for a shard actor's control calls (own/drop), recording them and what the
    routing table said about each metastore at that moment."""

    def __init__(self, routing: RoutingTable | None = None):
        self.owned_calls: list[list[str]] = []
        self.calls: list[tuple[str, list[str], bool, dict]] = []
        actor = self

        class _Call:
            def __init__(self, name):
                self.name = name

            async def remote(self, ids, warm=False):
                if self.name == "own":
                    actor.owned_calls.append(list(ids))
                owners = dict(routing.owner) if routing is not None else {}
                actor.calls.append((self.name, list(ids), warm, owners))

        self.own, self.drop = _Call("own"), _Call("drop")


async def test_a_dead_shards_metastores_are_spread_over_survivors_in_one_step(pg_url):
    store = await Store.open(pg_url, min_size=1, max_size=2)
    try:
        await store.migrate()
        ids = [str(uuid.uuid4()) for _ in range(30)]
        for i in ids:
            await store.create_metastore(i, f"rt-{i[:8]}", {"storage_root": f"file:///tmp/rt/{i}"})
        routing = RoutingTable(store)
        actors = {name: FakeActor() for name in ("a", "b", "c")}
        for name, actor in actors.items():
            routing.add_shard(ShardHandle(name, f"http://{name}", actor))
        routing.owner = {i: "a" for i in ids}
        routing.load = {ids[0]: 50.0}                  # one hot metastore
        await store.delete_metastore(ids[-1])          # deleted meanwhile: skipped, not a failure

        moved = await routing.shard_died("a")

        assert sorted(moved) == sorted(ids)
        assert not routing.shards["a"].alive
        per_shard = {n: [m for m, s in routing.owner.items() if s == n] for n in ("b", "c")}
        assert sorted(per_shard["b"] + per_shard["c"]) == sorted(ids)
        hot_home = routing.owner[ids[0]]
        other = "c" if hot_home == "b" else "b"
        assert len(per_shard[other]) > len(per_shard[hot_home])      # load-aware: the hot one weighs more
        # One control call per survivor, and the assignment persisted for every live metastore.
        assert [len(c) for c in actors["b"].owned_calls + actors["c"].owned_calls] == \
            [len(per_shard["b"]), len(per_shard["c"])]
        persisted = await store.shard_assignments()
        assert {m: persisted[m] for m in ids[:-1]} == {m: routing.owner[m] for m in ids[:-1]}
        assert ids[-1] not in persisted
    finally:
        await store.close()


async def test_a_planned_move_warms_the_new_owner_before_switching(pg_url):
    store = await Store.open(pg_url, min_size=1, max_size=2)
    try:
        await store.migrate()
        metastore_id = str(uuid.uuid4())
        await store.create_metastore(metastore_id, f"mv-{metastore_id[:8]}", {"storage_root": "file:///tmp/mv"})
        routing = RoutingTable(store)
        old, new = FakeActor(routing), FakeActor(routing)
        routing.add_shard(ShardHandle("old", "http://old", old))
        routing.add_shard(ShardHandle("new", "http://new", new))
        routing.owner[metastore_id] = "old"

        await routing.move(metastore_id, "new")

        name, ids, warm, owners_then = new.calls[0]
        assert (name, ids, warm) == ("own", [metastore_id], True)
        assert owners_then[metastore_id] == "old"            # requests still went to the old owner meanwhile
        assert routing.owner[metastore_id] == "new"
        assert (await store.shard_assignments())[metastore_id] == "new"
        assert [c[0] for c in old.calls] == ["drop"]
    finally:
        await store.close()
