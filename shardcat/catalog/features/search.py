"""Search: find catalogs, schemas, tables, volumes, functions and models by name, comment or tag.

`GET /shardcat/search?query=orders daily` answers the securables of the caller's metastore
whose full name or comment holds every word of the query (case-insensitive), that the caller
may see (the same rule as listing them); `tag:pii` and `tag:domain=sales` in the query keep only
assets holding that tag (with that value), on themselves or on one of their columns
(`matching_columns` names those); best first: the name equal to the first word, then
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


from ...auth import Caller
from ...entities.types import TYPES
from ...entities.text import bad_char
from ...errors import invalid
from ...governance.authorize import authorizer
from ...store import history
from ...shards.session import past_read
from ...web.paging import decode_page_token, encode_page_token, page_size
from ...shards.shard import Shard
from ...web.kit import ok
from ...web.routes import Handler, ShardServing
from ...governance.tag_policies import check_key, check_value

SEARCHABLE = ("catalog", "schema", "table", "volume", "function", "registered_model")
MAX_QUERY_CHARS = 200
MAX_WORDS = 8
_BY_SECURABLE_TYPE = {TYPES[t].securable_type: t for t in SEARCHABLE}
_START = (-1, "", str(uuid.UUID(int=0)))


def _like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _terms(query: str | None) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The words (lower-cased) and the tag conditions (`tag:key`, `tag:key=value`: as written) of a query."""
    # NFC, as names are stored: a decomposed `café` finds the composed one
    terms = unicodedata.normalize("NFC", query or "").split()
    if not terms:
        raise invalid("Query parameter 'query' must hold at least one word.")
    if len(query) > MAX_QUERY_CHARS or len(terms) > MAX_WORDS:
        raise invalid(f"Query parameter 'query' may hold at most {MAX_WORDS} words and {MAX_QUERY_CHARS} characters.")
    words, tags = [], []
    for term in terms:
        if term[:4].lower() == "tag:":
            key, eq, value = term[4:].partition("=")
            tags.append((check_key(key, "query"), check_value(value, "query") if eq else None))
        else:
            words.append(term.lower())
    return words, tags


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


def _result(rank: int, asset, words: list[str], tags: list[tuple[str, str | None]]) -> dict:
    info = asset.info
    out = {"securable_type": TYPES[asset.type].securable_type, "full_name": asset.full_name, "id": asset.id,
           "match": "name" if rank < 3 else "full_name_or_comment" if words else "tag"}
    for key in ("comment", "owner", "table_type", "data_source_format", "updated_at", "tags"):
        if info.get(key) is not None:
            out[key] = info[key]
    if tags:    # the columns holding a searched tag, when the asset's own tags do not
        columns = [c["name"] for c in info.get("columns") or [] if any(_holds(c.get("tags"), kv) for kv in tags)]
        if columns:
            out["matching_columns"] = columns
    return out


def _holds(tags: dict | None, condition: tuple[str, str | None]) -> bool:
    key, value = condition
    return bool(tags) and key in tags and (value is None or tags[key] == value)


class SearchService:
    def __init__(self, shard: Shard):
        self.shard = shard

    async def search(self, caller: Caller, query) -> dict:
        words, tags = _terms(query.get("query"))
        types = _types(query.get("securable_types"))
        limit = page_size(query.get("max_results"))
        after = _after(query.get("page_token"))
        ranks = (None, None, None)      # tags alone: every match ranks the same, in full-name order
        if words:
            first = _like(words[0])
            ranks = (words[0], first + "%", f"%{first}%")
        ms = caller.metastore()
        patterns = [f"%{_like(w)}%" for w in words]
        past = past_read()
        if past is not None:        # as the metastore was at a past version (catalog/features/versions.py)
            await self.shard.state(ms, caller.min_version, paths=False)     # caught up; no path asked
            found = await history.search_at(self.shard.store, ms, past.version, types, patterns, ranks, after,
                                            limit + 1, tags)
            await history.with_ancestors(self.shard.store, ms, past, [a for _, a in found])
            # found by what they were; shown with today's tags (governance is today's)
            found = list(zip([rank for rank, _ in found], await self.shard.governed_today(ms, [a for _, a in found])))
        else:
            found = await self.shard.read(ms, self.shard.store.search(ms, types, patterns, ranks, after, limit + 1,
                                                                      tags))
        page = found[:limit]
        authz = await authorizer(self.shard, caller)
        visible = set()
        for t in {a.type for _, a in page}:
            visible.update(a.id for a in authz.filter_any(t, [a for _, a in page if a.type == t]))
        out = {"results": [_result(rank, a, words, tags) for rank, a in page if a.id in visible]}
        if len(found) > limit:
            rank, last = page[-1]
            out["next_page_token"] = encode_page_token(json.dumps([rank, last.full_name, last.id]))
        return out


def shard_handlers(serving: ShardServing) -> dict[str, Handler]:
    """This module's handlers in the shard app by operationId (web/registry.py declares their paths)."""
    shard = serving.shard
    service = SearchService(shard)

    async def search(request):
        return ok(await service.search(request["caller"], request.query))

    return {"search": search}
