"""The driver's side of the catalog: REST calls, batched resolve, and the job's cache.

One `resolve` call answers everything a query needs (its tables, views, functions and paths,
with their dependencies, decisions and credentials) at one metastore version. What it returns
is kept for the length of the job: a later query naming only cached assets makes no call. A
query with anything not cached asks about all its names in one call (one snapshot per query);
for the cached ones it sends the metastore version their copy was taken at
(`if_changed_since`), and the server answers "unchanged" (with fresh decisions, without the
assets) unless the asset or a dependency was written since. An entry is dropped when this job
changes the asset (a write) or when its credentials near expiry; `clear()` forgets everything.
Calls and time spent in the catalog are counted, so a pipeline can report catalog time apart
from Spark time. Calls reuse one kept-alive connection per thread and server (a TLS handshake
per call would cost the catalog more than most answers do).
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from ..web.wire import PREFIX

READ_ONLY_POSTS = ("/resolve",)   # POSTs that change nothing: safe to send again, like a GET
CREDENTIAL_MARGIN_S = 60      # credentials this close to expiry are fetched again
CREDENTIALS = "temporary_credentials"   # the field resolve items carry them in (catalog/features/resolve.py)


class CatalogError(Exception):
    """The catalog refused or failed a request; `code` is its error_code, `name` the asset at fault."""

    def __init__(self, code: str, message: str, name: str | None = None, status: int | None = None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.name, self.status = code, message, name, status


@dataclass
class Stats:
    calls: int = 0                # HTTP requests to the catalog
    resolve_calls: int = 0
    resolved_items: int = 0
    cache_hits: int = 0
    unchanged: int = 0            # items the server answered "unchanged since the cached version"
    seconds: float = 0.0          # wall time inside catalog calls (this library's, and the Delta client's)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Resolved:
    """One answered resolve item, as cached for the job."""
    item: dict
    version: int                  # metastore version of the response it came from
    expires_ms: int | None = None  # earliest expiration of its credentials
    dependencies: list[dict] = field(default_factory=list)

    @property
    def asset(self) -> dict:
        for key in ("table", "volume", "function", "registered_model"):
            if key in self.item:
                return self.item[key]
        return {}


def _refresh(cached: dict, answer: dict) -> dict:
    """A cached item updated with an "unchanged" answer: the same assets, the fresh decisions
    (and credentials, if the answer carries them)."""
    fresh = {d["name"]: d for d in answer.get("dependencies", ())}
    merged = {**cached, **{k: v for k, v in answer.items() if k not in ("dependencies", "unchanged")}}
    merged["dependencies"] = [{**d, **{k: v for k, v in fresh.get(d["name"], {}).items()}}
                              for d in cached.get("dependencies", ())]
    return merged


def credentials_of(entry: dict) -> dict | None:
    """The temporary credentials (`{"url", "expiration_time"[, "aws_temp_credentials"]}`) a resolve
    item or dependency carries, or None (denied, no storage, a view, or not vended)."""
    cred = entry.get(CREDENTIALS)
    return cred if isinstance(cred, dict) else None


def _credential_expiry(item: dict) -> int | None:
    """Earliest expiration_time (ms) of any credentials an item (or its dependencies) carries."""
    times = []
    for entry in [item, *item.get("dependencies", ())]:
        cred = credentials_of(entry)
        if cred and cred.get("expiration_time"):
            times.append(int(cred["expiration_time"]))
    return min(times) if times else None


class CatalogClient:
    def __init__(self, url: str, token: str, *, trusted_engine: bool = False, timeout: float = 30.0):
        base = url.rstrip("/")
        self.api = base if base.endswith(PREFIX) else base + PREFIX
        self.token = token
        self.trusted_engine = trusted_engine
        self.timeout = timeout
        self.stats = Stats()
        self.version = 0                          # newest metastore version any response showed
        self._cache: dict[tuple[str, str], Resolved] = {}
        self._http = _Connections(timeout)

    # ---- HTTP ------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: dict | None = None, params: dict | None = None) -> dict:
        url = self.api + path + (("?" + urllib.parse.urlencode(params)) if params else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        retry_safe = method == "GET" or (method == "POST" and path in READ_ONLY_POSTS)
        started = time.perf_counter()
        try:
            status, raw = self._http.exchange(method, url, data, headers, retry_safe)
        finally:
            self.stats.calls += 1
            self.stats.seconds += time.perf_counter() - started
        if status >= 400:
            try:
                err = json.loads(raw or b"{}")
            except ValueError:
                err = {}
            err = err if isinstance(err, dict) else {}
            raise CatalogError(err.get("error_code", f"HTTP_{status}"),
                               err.get("message", raw[:200].decode("utf-8", "replace")), status=status)
        return json.loads(raw or b"{}")

    def close(self) -> None:
        """Close the catalog connections (every thread's); a later call opens a new one."""
        self._http.close()

    # ---- batched resolve, cached for the job -------------------------------------------------

    def resolve(self, wanted: list[tuple[str, str, str]], *, use_cache: bool = True) -> dict[tuple[str, str], Resolved]:
        """Answer [(securable_type, name, operation)] (operation READ or WRITE): from the job's cache
        when every entry is there and fresh, else in one resolve call for all of them (so a query's
        assets come from one snapshot). Items keep their per-item errors; callers check them."""
        keys = [(t.upper(), n.lower()) for t, n, _ in wanted]
        now_ms = time.time() * 1000
        if use_cache and all(self._fresh(k, op, now_ms) for k, (_, _, op) in zip(keys, wanted)):
            self.stats.cache_hits += len(keys)
            return {k: self._cache[k] for k in keys}
        items = []
        for key, (t, n, op) in zip(keys, wanted):
            item = {"name": n, "securable_type": t.upper(), "operation": op.upper()}
            cached = self._cache.get(key)
            if use_cache and cached is not None and self._fresh(key, op, now_ms):
                item["if_changed_since"] = cached.version     # the server says "unchanged" if so
            items.append(item)
        out = self._resolve_items(items)
        answered = {}
        for key, item in zip(keys, out["items"]):
            if item.get("unchanged") and key in self._cache:
                item = _refresh(self._cache[key].item, item)
                self.stats.unchanged += 1
            entry = Resolved(item, out["metastore_version"], _credential_expiry(item), item.get("dependencies", []))
            answered[key] = entry
            if "error" not in item:
                self._cache[key] = entry
            else:
                self._cache.pop(key, None)
        return answered

    def resolve_path(self, path: str, operation: str = "READ") -> dict:
        """The asset owning a storage path (and its decision and credentials), uncached: paths are
        few per job and their owner can change."""
        return self._resolve_items([{"path": path, "operation": operation}])["items"][0]

    def _resolve_items(self, items: list[dict]) -> dict:
        out = self.call("POST", "/resolve", {"items": items, "trusted_engine": self.trusted_engine})
        self.stats.resolve_calls += 1
        self.stats.resolved_items += len(items)
        self.version = max(self.version, out["metastore_version"])
        return out

    def _fresh(self, key: tuple[str, str], operation: str, now_ms: float) -> bool:
        entry = self._cache.get(key)
        if entry is None or entry.item.get("operation") != operation.upper():
            return False
        return entry.expires_ms is None or entry.expires_ms - CREDENTIAL_MARGIN_S * 1000 > now_ms

    def forget(self, securable_type: str, name: str) -> None:
        """This job changed the asset: the next query resolves it again."""
        self._cache.pop((securable_type.upper(), name.lower()), None)
        # views over it keep their metadata (a view's text does not change when its tables do)

    def clear(self) -> None:
        self._cache.clear()

    def cached(self) -> list[str]:
        return sorted(n for _, n in self._cache)


class _Connections:
    """Kept-alive HTTP connections, one per calling thread and server. A connection the server
    closed while it sat idle is noticed before it is used again; one that closes as a request
    goes out costs a second attempt, for reads only (a write may have been applied)."""

    def __init__(self, timeout: float):
        self._timeout = timeout
        self._local = threading.local()
        self._opened: list[http.client.HTTPConnection] = []    # every thread's, for close()
        self._lock = threading.Lock()

    def exchange(self, method: str, url: str, data: bytes | None, headers: dict,
                 retry_safe: bool) -> tuple[int, bytes]:
        """(status, body) of one request."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"The catalog URL must look like http(s)://host:port/..., got '{url}'.")
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        while True:
            conn, reused = self._connection(parts.scheme, parts.netloc)
            try:
                conn.request(method, target, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if reused and retry_safe:
                    continue            # a fresh connection next (`reused` is then False)
                raise
            except BaseException:
                conn.close()            # half a response may be left on it
                raise
            if response.will_close:
                conn.close()
            return response.status, raw

    def _connection(self, scheme: str, netloc: str) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to the server and whether it carried requests before."""
        mine = getattr(self._local, "connections", None)
        if mine is None:
            mine = self._local.connections = {}
        conn = mine.get((scheme, netloc))
        if conn is None:
            factory = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = mine[(scheme, netloc)] = factory(netloc, timeout=self._timeout)
            with self._lock:
                self._opened.append(conn)
        if conn.sock is not None and select.select([conn.sock], [], [], 0)[0]:
            conn.close()                # readable while idle: the server closed it (or broke protocol)
        return conn, conn.sock is not None

    def close(self) -> None:
        with self._lock:
            for conn in self._opened:
                conn.close()
