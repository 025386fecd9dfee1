"""What a cached asset is estimated to cost in memory: the sizes the metastore cache's LRU bound
(metastore_cache.py) counts, measured with tracemalloc (tests/unit/cache/test_metastore_cache.py)."""

from __future__ import annotations

import json

import orjson

from ..entities.asset import Asset

# Rough sizes (bytes) of what surrounds a record in memory; only the LRU bound uses them.
ASSET_OVERHEAD = 800     # the Asset, its strings and the cache's own record of it (chains.py)
# A served asset keeps its encoded answer (Asset.memo): its text and a quarter more (the answer's own
# fields, the bytes object). Its decoded info costs about three times its text once its keys and short
# strings are shared (compact.py; ~3.7 times before), less what it shares with other cached assets.
DECODED_EXPANSION = 3
JSON_EXPANSION = 5      # bytes per byte of text of an asset that shares nothing: 1.25 + 3, rounded up
TOMBSTONE_SIZE = 64
MEMBER_SIZE = 24        # its place in a listing's members and in its kept, sorted answer


def asset_size(asset: Asset, shared: int = 0) -> int:
    """Estimated bytes an asset takes in memory once served (measured with tracemalloc on tables of
    8 columns, tests/unit/cache/test_metastore_cache.py): its encoded answer, and its decoded JSON
    but for the `shared` bytes of it that are other cached assets' objects (compact.py: equal
    columns; its shared short strings still count, a bound rather than a count). The text is
    orjson's (a tenth of json.dumps' CPU, once per write), which leaves out json's spaces: 7%
    shorter on those tables, added back."""
    try:
        length = len(orjson.dumps(asset.info, default=str, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:       # what orjson refuses (integers past 64 bits)
        length = len(json.dumps(asset.info, default=str))
    text, own = length + length // 14, max(0, length - shared)
    return text + text // 4 + DECODED_EXPANSION * (own + own // 14) + ASSET_OVERHEAD
