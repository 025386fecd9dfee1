"""web/store_endpoints.py: which S3-compatible endpoints the catalog calls, and boto3's calls pinned to the
address vetted as they are sent (a name that answers differently a moment later reaches nothing unchecked)."""

from __future__ import annotations

import socket
import types

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from shardcat.errors import CatalogError
from shardcat.web import destinations, store_endpoints
from shardcat.web.store_endpoints import ENV, connect_url, pin_client, vetted

PUBLIC = "93.184.216.34"


@pytest.fixture(autouse=True)
def nothing_listed(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("SHARDCAT_S3_ENDPOINT", raising=False)


@pytest.fixture
def answers(monkeypatch):
    """The vetting resolver's answers for names under .rebind.test (what each lookup returns, in turn); every
    other name resolves as usual. Only the vetting is fooled: a client that resolved again would fail."""
    queue: dict[str, list[str]] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host.endswith(".rebind.test"):
            address = queue[host].pop(0) if len(queue[host]) > 1 else queue[host][0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return socket.getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(destinations, "socket", types.SimpleNamespace(getaddrinfo=getaddrinfo,
                                                                      SOCK_STREAM=socket.SOCK_STREAM))
    return queue


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9000", "http://localhost:9000", "http://169.254.169.254", "http://10.1.2.3:9000",
    "http://192.168.0.9", "http://172.16.0.1", "http://100.64.0.1", "http://0.0.0.0:9000", "http://[::1]:9000",
    "http://[::ffff:127.0.0.1]:9000", "http://[fe80::1]", "http://[fd00::1]", "http://2130706433:9000",
    "http://0x7f000001:9000", "http://0177.0.0.1:9000", "http://127.1:9000", "https://localhost",
    "http://no-such-host.invalid",
])
def test_addresses_that_are_not_public_are_refused_naming_the_allow_list(url):
    with pytest.raises(CatalogError) as refused:
        vetted(url, "INVALID_PARAMETER_VALUE")
    assert refused.value.code == "INVALID_PARAMETER_VALUE"
    assert ENV in str(refused.value) and "--s3-compatible-endpoint" in str(refused.value)
    assert "127.0.0.1" not in str(refused.value).replace(url, "")     # says nothing of what the name resolved to


@pytest.mark.parametrize("entry, url, allowed", [
    ("127.0.0.1:9000", "http://127.0.0.1:9000", True),
    ("127.0.0.1:9000", "http://127.0.0.1:9001", False),
    ("127.0.0.1", "http://127.0.0.1:9001", True),               # a host alone: every port
    ("localhost:9000", "http://127.0.0.1:9000", False),         # names are compared, not what they resolve to
    ("127.0.0.1:9000", "http://localhost:9000", False),
    ("[::1]:9000", "http://[::1]:9000", True),
    ("minio.lan:80", "http://MINIO.lan", True),                 # the scheme's port, case-blind
    ("minio.lan:443", "http://minio.lan", False),
    ("minio.lan", "http://bucket.minio.lan:9000", True),        # virtual-hosted: the listed store's bucket
    ("evilminio.lan", "http://minio.lan", False),
    (" 10.0.0.5:9000 , 10.0.0.6", "http://10.0.0.6:1", True),
])
def test_the_operator_lists_host_or_host_and_port(monkeypatch, entry, url, allowed):
    monkeypatch.setenv(ENV, entry)
    if allowed:
        assert vetted(url) is None
    else:
        with pytest.raises(CatalogError):
            vetted(url)


def test_the_operators_own_store_counts_as_listed(monkeypatch):
    monkeypatch.setenv("SHARDCAT_S3_ENDPOINT", "http://127.0.0.1:5000")
    assert vetted("http://127.0.0.1:5000") is None
    with pytest.raises(CatalogError):
        vetted("http://127.0.0.1:5001")


def test_connect_url_pins_http_path_style_to_the_vetted_address(answers):
    answers["store.rebind.test"] = [PUBLIC]
    assert connect_url("http://store.rebind.test:9000") == f"http://{PUBLIC}:9000"
    assert connect_url("https://store.rebind.test") == "https://store.rebind.test"     # TLS checks the name
    assert connect_url("http://store.rebind.test:9000", path_style=False) == "http://store.rebind.test:9000"
    answers["store.rebind.test"] = ["2606:2800:220:1:248:1893:25c8:1946"]
    assert connect_url("http://store.rebind.test:9000") == "http://[2606:2800:220:1:248:1893:25c8:1946]:9000"


def test_a_name_that_answers_loopback_later_is_refused_then(answers):
    answers["store.rebind.test"] = [PUBLIC, "127.0.0.1"]
    assert connect_url("http://store.rebind.test:9000") == f"http://{PUBLIC}:9000"
    with pytest.raises(CatalogError):
        connect_url("http://store.rebind.test:9000")


@pytest.fixture(scope="module")
def moto():
    """A moto S3 on loopback with IAM enforced: a key allowed s3:* on everything."""
    from moto.server import ThreadedMotoServer
    import requests
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    admin = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "admin",
             "aws_secret_access_key": "admin"}
    iam = boto3.client("iam", **admin)
    iam.create_user(UserName="pinned")
    iam.put_user_policy(UserName="pinned", PolicyName="all", PolicyDocument='{"Version": "2012-10-17", "Statement": '
                        '[{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}')
    key = iam.create_access_key(UserName="pinned")["AccessKey"]
    boto3.client("s3", **admin).create_bucket(Bucket="pinned")
    requests.post(f"{url}/moto-api/reset-auth", data=b"0").raise_for_status()
    yield {"port": port, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    requests.post(f"{url}/moto-api/reset-auth", data=b"inf").raise_for_status()
    server.stop()


def _client(moto, host: str, secret: str | None = None):
    return pin_client(boto3.session.Session().client(
        "s3", endpoint_url=f"http://{host}:{moto['port']}", region_name="us-east-1",
        aws_access_key_id=moto["key"], aws_secret_access_key=secret or moto["secret"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=2)))


def test_boto3_requests_go_to_the_vetted_address_signed_for_the_name(monkeypatch, answers, moto):
    # The store is on loopback; the vetting resolver (only it) says the name is there and the address
    # passes as public: the request reaches moto although the system cannot resolve the name, so it went
    # to the address vetted, and moto checked its signature against the Host header the name gave.
    monkeypatch.setattr(destinations, "is_public", lambda address: True)
    name = "localhost.rebind.test"      # moto takes a host starting so for path-style
    answers[name] = ["127.0.0.1"]
    with pytest.raises(OSError):
        socket.getaddrinfo(name, moto["port"])
    assert _client(moto, name).list_objects_v2(Bucket="pinned")["KeyCount"] == 0
    with pytest.raises(ClientError) as wrong:
        _client(moto, name, secret="not-the-secret").list_objects_v2(Bucket="pinned")
    assert wrong.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied")


def test_boto3_requests_are_vetted_each_time(answers, moto):
    answers["store.rebind.test"] = [PUBLIC, "127.0.0.1"]
    client = _client(moto, "store.rebind.test")
    with pytest.raises(Exception):          # the first answer: public, but nothing listens there (no network)
        client.list_objects_v2(Bucket="pinned")
    with pytest.raises(CatalogError):       # the next: loopback, refused before any connection
        client.list_objects_v2(Bucket="pinned")


def test_unlisted_loopback_store_is_not_called_listed_one_is(monkeypatch, moto):
    with pytest.raises(CatalogError):
        _client(moto, "127.0.0.1").list_objects_v2(Bucket="pinned")
    monkeypatch.setenv(ENV, f"127.0.0.1:{moto['port']}")
    assert _client(moto, "127.0.0.1").list_objects_v2(Bucket="pinned")["KeyCount"] == 0
    assert store_endpoints.vetted(f"http://127.0.0.1:{moto['port']}") is None
