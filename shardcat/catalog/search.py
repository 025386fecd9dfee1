"""Search: find catalogs, schemas, tables, volumes, functions and models by name or comment.

`GET /shardcat/search?query=orders daily` answers the securables of the caller's metastore
whose full name or comment holds every word of the query (case-insensitive), that the caller
may see (the same rule as listing them), best first: the name equal to the first word, then
names starting with it, then names holding it, then the rest; ties in full-name order. Read
from PostgreSQL at one metastore version (a search is rare next to reads: no shard keeps an
index for it), where a trigram index finds the assets holding a rare word without reading the
metastore's others (migration 0009; docs/benchmarks.md, *Search*). A page can come back short
when the caller may not see some matches; its `next_page_token` still moves on.
"""

from __future__ import annotations

import json
import unicodedata
import uuid

from aiohttp import web

from ..auth import Caller
from ..entities.types import TYPES
from ..entities.text import bad_char
from ..errors import invalid
from ..governance.authorize import authorizer
from ..web.paging import decode_page_token, encode_page_token, page_size
from ..shards.shard import Shard
from ..web.kit import ok

SEARCHABLE = ("catalog", "schema", "table", "volume", "function", "registered_model")
MAX_QUERY_CHARS = 200
MAX_WORDS = 8
_BY_SECURABLE_TYPE = {TYPES[t].securable_type: t for t in SEARCHABLE}
_START = (-1, "", str(uuid.UUID(int=0)))


def _like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _words(query: str | None) -> list[str]:
    # NFC, as names are stored: a decomposed `café` finds the composed one
    words = unicodedata.normalize("NFC", (query or "").lower()).split()
    if not words:
        raise invalid("Query parameter 'query' must hold at least one word.")
    if len(query) > MAX_QUERY_CHARS or len(words) > MAX_WORDS:
        raise invalid(f"Query parameter 'query' may hold at most {MAX_WORDS} words and {MAX_QUERY_CHARS} characters.")
    return words


def _types(value: str | None) -> list[str]:
    if not value:
        return list(SEARCHABLE)
    out = []
    for name in value.split(","):
        t = _BY_SECURABLE_TYPE.get(name.strip().upper())
        if t is None:
            raise invalid(f"securable_types must be a comma-separated list of {', '.join(_BY_SECURABLE_TYPE)}; "
                          f"got '{name.strip():.40}'.")
        out.append(t)
    return out


def _after(token: str | None) -> tuple[int, str, str]:
    raw = decode_page_token(token)
    if not raw:
        return _START
    try:
        rank, full_name, asset_id = json.loads(raw)
        # ranks are 0 to 3; the name goes to PostgreSQL, which takes no NUL or lone surrogate
        if type(rank) is int and 0 <= rank <= 3 and isinstance(full_name, str) and bad_char(full_name) is None:
            return rank, full_name, str(uuid.UUID(asset_id))
    except (ValueError, TypeError, AttributeError):
        pass
    raise invalid(f"Invalid page_token '{token:.40}': use the next_page_token of a previous response.")


def _result(rank: int, asset) -> dict:
    info = asset.info
    out = {"securable_type": TYPES[asset.type].securable_type, "full_name": asset.full_name, "id": asset.id,
           "match": "name" if rank < 3 else "full_name_or_comment"}
    for key in ("comment", "owner", "table_type", "data_source_format", "updated_at"):
        if info.get(key) is not None:
            out[key] = info[key]
    return out


class SearchService:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def search(self, caller: Caller, query) -> dict:
        words = _words(query.get("query"))
        types = _types(query.get("securable_types"))
        limit = page_size(query.get("max_results"))
        after = _after(query.get("page_token"))
        first = _like(words[0])
        ms = caller.metastore()
        found = await self.shard.read(ms, self.shard.store.search(
            ms, types, [f"%{_like(w)}%" for w in words], (words[0], first + "%", f"%{first}%"), after, limit + 1))
        page = found[:limit]
        authz = await authorizer(self.shard, caller)
        visible = set()
        for t in {a.type for _, a in page}:
            visible.update(a.id for a in authz.filter_any(t, [a for _, a in page if a.type == t]))
        out = {"results": [_result(rank, a) for rank, a in page if a.id in visible]}
        if len(found) > limit:
            rank, last = page[-1]
            out["next_page_token"] = encode_page_token(json.dumps([rank, last.full_name, last.id]))
        return out


def search_routes(shard: Shard, prefix: str) -> list[web.RouteDef]:
    service = SearchService(shard)

    async def search(request):
        return ok(await service.search(request["caller"], request.query))

    return [web.get(f"{prefix}/shardcat/search", search)]
