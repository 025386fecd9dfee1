"""Share what cached assets repeat, so a cached asset costs its own text and not a copy of every
name, type and column it has in common with others (issue #48: a cached table's bytes).

A decoded `Asset.info` is an object graph: each of a table's columns a dict of seven or so
strings, and across a catalog the same columns (`id`, `LONG`, `bigint`, their `type_json`), the
same owners and property keys come back in table after table. `share_info` makes equal short
strings one object (entities/shared_strings.py) and equal columns one dict (a bounded pool of
the columns seen last), in place: the values stay equal, so nothing that reads the info can
tell, and nothing may write to a cached asset's info anyway (a changed asset is a new `Asset`).
Pure data structure: no I/O.
"""

from __future__ import annotations

from collections import OrderedDict

import orjson

from ..entities.shared_strings import shared

# Strings up to this long are shared: names, types, owners, property keys and values, a column's
# type_json. Longer ones (view text, a long comment) are seldom repeated.
SHORT = 256
# Distinct columns remembered for sharing. A column leaves the pool when it is the least recently
# seen; the assets holding it keep it. Bounded, so the pool costs at most a few MB.
POOL_COLUMNS = 4096


def _share(value):
    """`value` with its short strings shared, lists and dicts changed in place."""
    kind = type(value)
    if kind is str:
        return shared(value) if len(value) <= SHORT else value
    if kind is dict:
        # Keys too (json.loads makes new ones for every document): the dict is filled again in order.
        items = [(shared(k) if type(k) is str else k, _share(v)) for k, v in value.items()]
        value.clear()
        value.update(items)
    elif kind is list:
        for i, item in enumerate(value):
            kept = _share(item)
            if kept is not item:
                value[i] = kept
    return value


def _key(column: dict) -> tuple:
    # Each value's type too: True == 1 == 1.0 would otherwise pass for one another.
    return tuple(column.items()), tuple(map(type, column.values()))


class ColumnPool:
    """Equal columns as one dict: the first seen of each, among the `size` seen last."""

    def __init__(self, size: int = POOL_COLUMNS):
        self.size = size
        self._pool: OrderedDict[tuple, tuple[dict, int]] = OrderedDict()   # key -> (column, its JSON's length)

    def column(self, column) -> tuple[object, int]:
        """The pooled dict equal to `column` and its JSON's length, the bytes sharing it saved;
        `column` itself and 0 when it is new (now pooled), or holds a list or a dict (tags, a mask:
        those are not compared; its strings are shared all the same)."""
        if type(column) is not dict:
            return _share(column), 0
        try:
            key = _key(column)
            pooled = self._pool.get(key)
        except TypeError:           # an unhashable value: not pooled
            return _share(column), 0
        if pooled is not None:
            self._pool.move_to_end(key)
            return pooled
        _share(column)
        self._pool[_key(column)] = (column, _json_length(column))    # the key of shared strings: no copies
        if len(self._pool) > self.size:
            self._pool.popitem(last=False)
        return column, 0

    def __len__(self) -> int:
        return len(self._pool)


def _json_length(value) -> int:
    try:
        return len(orjson.dumps(value))
    except TypeError:           # what orjson refuses (integers past 64 bits): counted as nothing saved
        return 0


COLUMNS = ColumnPool()      # one per process: equal columns of different metastores are shared too


def share_info(info, pool: ColumnPool = COLUMNS) -> int:
    """Share the short strings and the columns of an asset's info, in place. Returns the length of
    the JSON of the columns it found pooled: what this info no longer holds a copy of."""
    if type(info) is not dict:
        return 0
    saved = 0
    items = []
    ints: dict[int, int] = {}   # its equal numbers as one object: updated_at is created_at until a change
    for key, item in info.items():
        if type(item) is int:
            item = ints.setdefault(item, item)
        elif key == "columns" and type(item) is list:
            for i, column in enumerate(item):
                pooled, length = pool.column(column)
                saved += length
                if pooled is not column:
                    item[i] = pooled
        else:
            item = _share(item)
        items.append((shared(key) if type(key) is str else key, item))
    info.clear()
    info.update(items)
    return saved


def share_asset(asset) -> int:
    """`share_info` of an asset's info, whose storage location is then the asset's own path string."""
    info = asset.info
    saved = share_info(info)
    path = asset.storage_path
    if path is not None and type(info) is dict and info.get("storage_location") == path:
        info["storage_location"] = path
    return saved
