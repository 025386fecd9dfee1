"""The servers pyiceberg's integration suite expects on fixed local ports, started on 127.0.0.1 in place of its
docker-compose (`dev/docker-compose-integration.yml` of apache/iceberg-python), for tools/pyiceberg_suite.py:

- 8181, its `rest` service (the Java reference REST catalog, open to anyone): a forwarding proxy to shardcat's
  Iceberg REST catalog. The suite's fixtures there send no token and no warehouse, so the proxy adds the two a
  client of shardcat must send: the admin's bearer token (to a request carrying no token, or pyiceberg's
  `Bearer None`, what it sends when given none) and the warehouse (to a `/v1/config` naming none).
  Everything else passes through unchanged, both ways.
- 9000, its `minio` service (keys admin / password, bucket `warehouse`): moto's S3 server, one answer of it
  corrected to S3's (`_S3Answers`).
- 15002, its `spark-iceberg` service: pyspark's own Spark Connect server with Iceberg's Spark runtime (the jars
  pinned in jvm/spark), its default catalog `rest` being the catalog at 8181, as the suite's spark-defaults.conf
  configures it (S3 at 9000 for s3:// paths; a table's own files are where shardcat's storage puts them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import boto3
from aiohttp import ClientSession, ClientTimeout, web
from multidict import CIMultiDict
from yarl import URL

REPO = Path(__file__).resolve().parents[1]
REST_PORT, S3_PORT, SPARK_CONNECT_PORT = 8181, 9000, 15002
S3_KEYS = {"aws_access_key_id": "admin", "aws_secret_access_key": "password"}   # the suite's MinIO root user
# Hop-by-hop headers, and those aiohttp sets itself for the bytes it sends.
_NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


def require_free(*ports: int) -> None:
    """Refuse to start when one of the suite's fixed ports is taken (another run, another server)."""
    for port in ports:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                sys.exit(f"127.0.0.1:{port} is taken: pyiceberg's suite needs it for its own server")


def wait_for_port(port: int, seconds: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for port {port} stopped (exit {process.returncode})")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(1)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {seconds:.0f} s")


class RestForward:
    """127.0.0.1:8181/v1/... forwarded to `<shardcat>/iceberg/v1/...`, in a thread of its own."""

    def __init__(self, iceberg_url: str, token: str, warehouse: str, port: int = REST_PORT):
        self.target, self.token, self.warehouse, self.port = iceberg_url.rstrip("/"), token, warehouse, port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _forward(self, request: web.Request) -> web.Response:
        # The path and query as sent (still percent-encoded: a namespace's %1F separator, an encoded slash).
        path, query = request.rel_url.raw_path, request.rel_url.raw_query_string
        if path == "/v1/config" and "warehouse" not in request.query:
            query = "&".join(filter(None, [query, "warehouse=" + quote(self.warehouse, safe="")]))
        url = URL(self.target + path + (f"?{query}" if query else ""), encoded=True)
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED)
        if headers.get("Authorization", "Bearer None") == "Bearer None":   # pyiceberg's way of sending no token
            headers["Authorization"] = f"Bearer {self.token}"
        async with self.session.request(request.method, url, headers=headers, data=await request.read(),
                                        allow_redirects=False) as answer:
            body = await answer.read()
            back = CIMultiDict((k, v) for k, v in answer.headers.items() if k.lower() not in _NOT_FORWARDED)
            return web.Response(status=answer.status, body=body, headers=back)

    async def _start(self) -> None:
        # Bytes pass through as they are (a gzip answer stays gzip, with its Content-Encoding).
        self.session = ClientSession(auto_decompress=False, timeout=ClientTimeout(total=600))
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        await self.runner.cleanup()
        await self.session.close()

    def start(self) -> "RestForward":
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class _S3Answers:
    """moto's S3 with one answer corrected: moto 5 roots CompleteMultipartUpload's answer at
    <CompleteMultipartUploadResponse>, S3 (and MinIO) at <CompleteMultipartUploadResult>, the one pyarrow's AWS
    SDK accepts (any other it reads as an error inside a 200: every multipart write, so every Parquet file
    pyiceberg writes, would fail)."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] != "POST" or "uploadId=" not in environ.get("QUERY_STRING", ""):
            return self.app(environ, start_response)
        answer = {}
        body = b"".join(self.app(environ, lambda status, headers, exc_info=None: answer.update(s=status, h=headers)))
        body = body.replace(b"CompleteMultipartUploadResponse", b"CompleteMultipartUploadResult")
        headers = [(k, str(len(body)) if k.lower() == "content-length" else v) for k, v in answer["h"]]
        start_response(answer["s"], headers)
        return [body]


class S3Server:
    """moto's S3 server as the suite's MinIO, in a thread: its bucket `warehouse`, its keys accepted."""

    def __init__(self, port: int = S3_PORT):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server
        logging.getLogger("werkzeug").setLevel(logging.ERROR)        # no line per request
        app = _S3Answers(DomainDispatcherApplication(create_backend_app))
        self.server = make_server("127.0.0.1", port, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.port = port

    def start(self) -> "S3Server":
        self.thread.start()
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}", region_name="us-east-1",
                     **S3_KEYS).create_bucket(Bucket="warehouse")
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(10)


def spark_connect_command(rest_uri: str, s3_endpoint: str) -> list[str]:
    """spark-submit of Spark's Connect server, configured as the suite's spark-defaults.conf configures its own
    (catalog `rest`, the default one, over the REST catalog; ANSI off), without its Hive catalogs."""
    import pyspark
    sys.path.insert(0, str(REPO))
    from tests import jvm                    # the pinned jars of jvm/spark, resolved once into ~/.m2
    home = Path(pyspark.__file__).parent
    conf = {
        "spark.master": "local[*]",
        "spark.jars": ",".join(p for p in jvm.classpath("spark").split(os.pathsep) if p),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.rest": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.rest.type": "rest",
        "spark.sql.catalog.rest.uri": rest_uri,
        "spark.sql.catalog.rest.cache-enabled": "false",
        "spark.sql.catalog.rest.s3.endpoint": s3_endpoint,
        "spark.sql.catalog.rest.s3.path-style-access": "true",
        "spark.sql.catalog.rest.client.region": "us-east-1",
        # Iceberg 1.12's S3FileIO builds the AWS SDK's Apache 5 client (`apache`) or its URL-connection one; the
        # SDK bundle jvm/spark pins (2.29.52) has neither: the second, at that version, from Maven Central
        "spark.sql.catalog.rest.http-client.type": "urlconnection",
        "spark.jars.packages": "software.amazon.awssdk:url-connection-client:2.29.52",
        "spark.sql.defaultCatalog": "rest",
        "spark.sql.ansi.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint": s3_endpoint,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(SPARK_CONNECT_PORT),
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        "spark.driver.memory": "3g",
    }
    command = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--name", "pyiceberg-suite"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return command


def start_spark_connect(rest_uri: str, s3_endpoint: str, log: Path) -> subprocess.Popen:
    """The Connect server as a child process (its output in `log`), once it listens on 15002."""
    import pyspark
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "AWS_ACCESS_KEY_ID": "admin",
           "AWS_SECRET_ACCESS_KEY": "password", "AWS_REGION": "us-east-1"}
    out = log.open("w")
    process = subprocess.Popen(spark_connect_command(rest_uri, s3_endpoint), stdout=out, stderr=subprocess.STDOUT,
                               env=env, start_new_session=True)
    try:
        wait_for_port(SPARK_CONNECT_PORT, 300, process)
    except RuntimeError:
        stop(process)
        raise
    return process


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
