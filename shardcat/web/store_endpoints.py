"""The S3-compatible stores' endpoints the catalog itself calls: public addresses, or ones the operator listed.

An `s3_compatible` credential's `endpoint_url` is its creator's choice, and the catalog sends requests
there with its own hands: GET /files, STS AssumeRole, Iceberg metadata reads and writes, maintenance
deletes. It does so only when the endpoint's host resolves to public addresses alone (the rule and the
resolver webhooks follow, destinations.py: every IPv4 spelling comes out as the address it means), or
when the operator listed the endpoint: $SHARDCAT_S3_COMPATIBLE_ENDPOINTS or `shardcat serve
--s3-compatible-endpoint`, comma-separated `host` (any port) or `host:port` entries. $SHARDCAT_S3_ENDPOINT,
the operator's own store, counts as listed.

The endpoint is judged when a credential is created or changed, and again at every call: its name is
resolved anew, so one that points elsewhere later (DNS rebinding) is refused then. Between that check
and the connection, boto3's calls (`pin_client`) and pyarrow's and pyiceberg's (`connect_url`) connect over
http:// to the address just vetted, the name kept in the Host header (which the signature covers); over
https:// the certificate must match the name, which no internal address can show.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit, urlunsplit

from ..errors import CatalogError
from .destinations import Refused, public_addresses

ENV = "SHARDCAT_S3_COMPATIBLE_ENDPOINTS"
OPTION = "--s3-compatible-endpoint"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_port(netloc: str, scheme: str = "http") -> tuple[str, int | None]:
    """(host in lower case without IPv6 brackets, port or None) of `host[:port]` or a URL."""
    parts = urlsplit(netloc if "://" in netloc else f"//{netloc}")
    port = parts.port if parts.port is not None else (_DEFAULT_PORTS.get(parts.scheme) if "://" in netloc else None)
    return (parts.hostname or "").rstrip("."), port


def listed() -> set[tuple[str, int | None]]:
    """The operator's entries: (host, port), port None for every port; unreadable entries are skipped."""
    out = set()
    entries = os.environ.get(ENV, "").split(",") + [os.environ.get("SHARDCAT_S3_ENDPOINT", "")]
    for entry in entries:
        try:
            host, port = _host_port(entry.strip())
        except ValueError:
            continue
        if host:
            out.add((host, port))
    return out


def _is_listed(host: str, port: int, entries: set) -> bool:
    # a virtual-hosted request goes to bucket.<host>: the listed host's subdomains are its buckets
    return any((host == h or host.endswith("." + h)) and p in (None, port) for h, p in entries)


def vetted(url: str, code: str = "FAILED_PRECONDITION") -> list[str] | None:
    """The public addresses `url`'s host resolves to now, or None when the operator listed it (connect as
    named); a CatalogError (`code`) naming the allow-list when it is neither. Blocking (DNS)."""
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").rstrip("."), parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        raise CatalogError(code, f"The S3-compatible endpoint '{url:.120}' is not a valid URL.") from None
    if host and port and _is_listed(host, port, listed()):
        return None
    try:
        return public_addresses(host, port)
    except Refused:
        # one refusal, whatever the name resolved to (or whether it resolved): nothing about the network leaks
        raise CatalogError(code, f"The S3-compatible endpoint '{url:.120}' is not one this server calls: its host "
                                 "must resolve to public addresses only, or the operator must list it (host or "
                                 f"host:port) in ${ENV} or with `shardcat serve {OPTION}`.") from None


def _address_netloc(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ipaddress.ip_address(address.split("%", 1)[0]).version == 6 else \
        f"{address}:{port}"


def connect_url(endpoint: str, *, path_style: bool = True) -> str:
    """The endpoint a client of the catalog's own should connect to now: an http:// path-style endpoint
    as the address just vetted (its host replaced), else the endpoint itself once vetted."""
    addresses = vetted(endpoint)
    parts = urlsplit(endpoint)
    if addresses is None or parts.scheme.lower() != "http" or not path_style:
        return endpoint
    return urlunsplit(parts._replace(netloc=_address_netloc(addresses[0], parts.port or 80)))


def _before_send(request, **_) -> None:
    """boto3's last hook before a request leaves: vet its host now and, over http://, send it to the vetted
    address with the Host header the request was signed with."""
    addresses = vetted(request.url)
    parts = urlsplit(request.url)
    if addresses is None or parts.scheme.lower() != "http":
        return
    port = parts.port or 80
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    request.headers["Host"] = host if port == 80 else f"{host}:{port}"     # as botocore signed it
    request.url = urlunsplit(parts._replace(netloc=_address_netloc(addresses[0], port)))


def pin_client(client):
    """`client` (boto3's) with every request's host vetted, and pinned, as it is sent."""
    client.meta.events.register_last("before-send", _before_send)
    return client
