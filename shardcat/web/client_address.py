"""Who the client is: its IP address (as a router vouches for it with an HMAC, or as the HTTP/1.1
front saw it) and the origin it addressed (scheme://host[:port])."""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

from .wire import CLIENT_ADDRESS_HEADER, CLIENT_HOST_HEADER, FORWARDED_FOR_HEADER


_FORWARDED_CONTEXT = b"shardcat forwarded client address v1"


def _address_mac(key: bytes, address: str) -> str:
    return hmac.new(hmac.new(key, _FORWARDED_CONTEXT, hashlib.sha256).digest(), address.encode(),
                    hashlib.sha256).hexdigest()


def forwarded_for(box, address: str) -> str | None:
    """The header value a router sends a shard to vouch for the client's address (HMAC under the
    server's first secret key: every process of a catalog holds the same keys); None without keys."""
    keys = list(box.keys) if box is not None else []
    return f"{address};{_address_mac(keys[0], address)}" if keys and address else None


def client_address(request: web.Request, box=None) -> str | None:
    """The client's IP address: the one a router vouched for (behind a router, the front before a
    shard sees the router), else the one the HTTP/1.1 front saw, else the connection's."""
    vouched = request.headers.get(FORWARDED_FOR_HEADER)
    if vouched and box is not None:
        address, _, mac = vouched.rpartition(";")
        if any(hmac.compare_digest(_address_mac(k, address), mac) for k in box.keys):
            return address
    return request.headers.get(CLIENT_ADDRESS_HEADER) or request.remote


def public_origin(request: web.Request) -> str:
    """scheme://host[:port] as the client addressed this server (through the front: its Host header)."""
    host = request.headers.get(CLIENT_HOST_HEADER) or request.host
    return f"{request.scheme}://{host}"
