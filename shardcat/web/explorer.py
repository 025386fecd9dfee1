"""The catalog explorer: the static page (HTML, JavaScript, CSS in web/explorer/, shipped in the
package, no build step, nothing fetched at run time) that `shardcat serve` answers at `/`.

The page is only a client of the public API: it signs in with a token (or an identity provider's
token, exchanged), and every list and detail it shows comes from the API with that token, so it
sees exactly what its user may see. Its files need no token (they hold no data) and are not audited.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from ..errors import CatalogError

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# Scripts and styles from this origin only, no inline script, no framing; the API is same-origin.
_HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                                       "base-uri 'none'; form-action 'self'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}


def _files() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, content type) of the page's files, read once."""
    out = {}
    for item in resources.files(__package__).joinpath("explorer").iterdir():
        suffix = item.name[item.name.rfind("."):]
        if item.is_file() and suffix in _TYPES:
            out[item.name] = (item.read_bytes(), _TYPES[suffix])
    return out


def explorer_routes() -> list[web.RouteDef]:
    files = _files()

    def answer(name: str) -> web.Response:
        found = files.get(name)
        if found is None:
            raise CatalogError("NOT_FOUND", f"The explorer has no file '{name[:80]}'.")
        body, content_type = found
        return web.Response(body=body, headers={"Content-Type": content_type, **_HEADERS})

    async def index(request):
        return answer("index.html")

    async def asset(request):
        return answer(request.match_info["file"])

    return [web.get("/", index), web.get("/explorer/{file}", asset)]
