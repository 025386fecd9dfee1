"""The catalog explorer: the static page (HTML, JavaScript, CSS in web/explorer/, shipped in the
package, no build step, nothing fetched at run time) that `shardcat serve` answers at `/`.

The page is only a client of the public API: it signs in with a token (or an identity provider's
token, exchanged), and every list and detail it shows comes from the API with that token, so it
sees exactly what its user may see. Its files need no token (they hold no data) and are not audited,
nor does its icon (`/favicon.ico`).
With an identity provider's public client configured (`--oidc-client-id`), `sign-in.json` tells the
page where the provider's login is, and the page signs in there (authorization code with PKCE),
then exchanges the provider's token for a shardcat token.
"""

from __future__ import annotations

import logging
from importlib import resources
from urllib.parse import urlsplit

from aiohttp import web

from ..errors import CatalogError
from .routes import Handler

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
# Scripts and styles from this origin only, no inline script, no framing; the API is same-origin.
_POLICY = ("default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; "
           "connect-src 'self'{token_origin}")
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
SIGN_IN = "sign-in.json"

log = logging.getLogger(__name__)


def _files() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, content type) of the page's files, read once."""
    out = {}
    for item in resources.files(__package__).joinpath("explorer").iterdir():
        suffix = item.name[item.name.rfind("."):]
        if item.is_file() and suffix in _TYPES:
            out[item.name] = (item.read_bytes(), _TYPES[suffix])
    return out


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def explorer_handlers(identity_provider=None) -> dict[str, Handler]:
    """`identity_provider`: governance/oidc.py's verifier, whose `sign_in_settings` the page reads."""
    files = _files()
    settings: dict | None = None

    async def sign_in() -> dict:
        nonlocal settings
        if settings is None:
            try:
                settings = await identity_provider.sign_in_settings() if identity_provider is not None else {}
            except Exception as e:      # the provider's discovery document is unreachable: try again next time
                log.warning("explorer: no sign-in settings from the identity provider: %r", e)
                return {}
        return settings

    async def answer(name: str) -> web.Response:
        found = files.get(name)
        if found is None:
            raise CatalogError("NOT_FOUND", f"The explorer has no file '{name[:80]}'.")
        body, content_type = found
        token_endpoint = (await sign_in()).get("token_endpoint")
        policy = _POLICY.format(token_origin=f" {_origin(token_endpoint)}" if token_endpoint else "")
        return web.Response(body=body, headers={"Content-Type": content_type, "Content-Security-Policy": policy,
                                                **_HEADERS})

    async def index(request):
        return await answer("index.html")

    async def asset(request):
        if request.match_info["file"] == SIGN_IN:
            return web.json_response(await sign_in(), headers=_HEADERS)
        return await answer(request.match_info["file"])

    async def favicon(request):     # browsers ask for it without a token, at this path
        return await answer("favicon.png")

    return {"explorer": index, "explorerFile": asset, "favicon": favicon}
