"""Requests the server sends where a user aimed it (webhooks): to public addresses only.

A destination's host is resolved off the event loop (the system resolver, as a connection would
resolve it: decimal, hex, octal and short IPv4 spellings come out as the address they mean) and
every address it gives must be public: not loopback, private, link-local, shared (100.64/10),
unspecified, multicast, reserved, documentation or benchmarking (`ipaddress`' `is_global`; IPv4
inside IPv6, mapped or 6to4, judged as the IPv4 address). A name with any other address is
refused whole, and so is one that does not resolve: one refusal, which says nothing of what the
name resolved to.

`post` then connects to an address it vetted itself, the URL's host replaced by it (the name kept
in the Host header and for TLS), resolving again for every request: a name that answers
differently a moment later (DNS rebinding) reaches no address that was not checked. It follows no
redirect. Hosts the operator allowed by name (`shardcat serve --webhook-allow-host`) are posted to
whatever they resolve to: for tests and receivers inside the operator's own network.
`public_addresses` is the same judgement, blocking, for the S3-compatible stores the catalog calls
(governance/s3_compatible.py).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Collection

import aiohttp
from yarl import URL

RESOLVE_SECONDS = 5.0


class Refused(Exception):
    """The destination is not one the server sends requests to."""


def allowed_host(host: str) -> str:
    """An operator's allowed host as URLs' hosts compare with it: lower case, IPv6 without brackets."""
    return host.strip().lower().removeprefix("[").removesuffix("]")


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])       # a link-local IPv6 address's zone dropped
    if ip.version == 6 and (ip.ipv4_mapped or ip.sixtofour):
        ip = ip.ipv4_mapped or ip.sixtofour
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or getattr(ip, "is_site_local", False))


def _judged(host: str, found: list, allowed: Collection[str]) -> list[str]:
    addresses = list(dict.fromkeys(info[4][0] for info in found))
    if not addresses or (host.lower() not in allowed and not all(is_public(a) for a in addresses)):
        raise Refused(host)
    return addresses


def public_addresses(host: str, port: int | None, allowed: Collection[str] = ()) -> list[str]:
    """The addresses `host` resolves to now, all public (or the host allowed); else Refused. Blocking:
    for callers already in a worker thread (boto3's and pyarrow's S3 calls, governance/s3_compatible.py)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        raise Refused(host) from None
    return _judged(host, found, allowed)


async def vetted_addresses(url: URL, allowed: Collection[str]) -> list[str]:
    """The addresses `url`'s host resolves to, all public (or the host allowed); else Refused."""
    host = url.raw_host
    if url.scheme not in ("http", "https") or not host:
        raise Refused(str(url))
    try:
        found = await asyncio.wait_for(asyncio.to_thread(socket.getaddrinfo, host, url.port,
                                                         type=socket.SOCK_STREAM), RESOLVE_SECONDS)
    except (OSError, UnicodeError, ValueError, asyncio.TimeoutError):
        raise Refused(host) from None
    return _judged(host, found, allowed)


def _host_header(url: URL) -> str:
    host = f"[{url.raw_host}]" if ":" in url.raw_host else url.raw_host
    return host if url.is_default_port() else f"{host}:{url.port}"


async def post(session: aiohttp.ClientSession, url: URL, allowed: Collection[str], *, data: bytes,
               headers: dict) -> int:
    """POST to `url` at an address vetted now (each in turn until one connects); the answer's status.
    Refused, or aiohttp's and the network's errors, when nothing answered."""
    headers = {**headers, "Host": _host_header(url)}
    tls = {"server_hostname": url.raw_host} if url.scheme == "https" else {}
    failed = None
    for address in await vetted_addresses(url, allowed):
        try:
            async with session.post(url.with_host(address), data=data, headers=headers, allow_redirects=False,
                                    **tls) as answer:
                return answer.status
        except aiohttp.ClientConnectorError as e:        # this address does not connect: the next one
            failed = e
    raise failed
