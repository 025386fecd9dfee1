"""A single-node Trino (coordinator and worker in one JVM) on 127.0.0.1, from the published server tarball.

jvm/trino/pom.xml pins io.trino:trino-server's tar.gz; Maven fetches it into ~/.m2 once. It is unpacked
once beside the class path cache (tests/jvm.py), keeping only the server's jars and the Iceberg and Delta
Lake plugins. Each start writes etc/ (config.properties, node.properties, jvm.config) into a fresh
directory and runs the launcher in the foreground under the Java 25 JDK Trino needs. Catalogs are made
with `CREATE CATALOG` (catalog.management=dynamic): each test's catalog carries its own caller's token.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import jvm

PLUGINS = ("iceberg", "delta-lake")


def install() -> Path:
    """The unpacked server (bin/, lib/, plugin/{iceberg,delta-lake}), unpacked on first use."""
    tarball = Path(jvm.classpath("trino"))
    home = jvm.CACHE / tarball.name.removesuffix(".tar.gz")
    if (home / ".unpacked").exists():
        return home
    partial = home.with_name(home.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    # GNU tar, not Maven's unpacker or Python's tarfile: the plugins share jars as hard links, which the
    # first unpacks as empty files and the second finds by re-reading the gzip stream (minutes).
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(partial), "--strip-components=1"], check=True)
    for plugin in (partial / "plugin").iterdir():
        if plugin.name not in PLUGINS:
            shutil.rmtree(plugin)       # fewer plugins, faster start; the kept ones hold their own links
    (partial / ".unpacked").touch()
    shutil.rmtree(home, ignore_errors=True)
    partial.rename(home)
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Trino:
    """One running Trino; `host`, `port`, and `stop()`."""

    def __init__(self, workdir: Path, *, heap: str = "2G", start_timeout: float = 240):
        home = install()
        self.host, self.port = "127.0.0.1", free_port()
        etc, data = workdir / "etc", workdir / "data"
        etc.mkdir(parents=True)
        data.mkdir()
        (etc / "node.properties").write_text(
            f"node.environment=shardcat_test\nnode.id=trino-{self.port}\nnode.data-dir={data}\n"
            f"node.bind-ip={self.host}\nnode.internal-address={self.host}\n")     # loopback only
        (etc / "config.properties").write_text("\n".join([
            "coordinator=true",
            "node-scheduler.include-coordinator=true",
            f"http-server.http.port={self.port}",
            f"discovery.uri=http://{self.host}:{self.port}",
            f"plugin.dir={home / 'plugin'}",
            "catalog.management=dynamic",       # CREATE CATALOG per test, each with its caller's token
            "catalog.store=memory",
            "query.max-memory=1GB",
            "query.max-memory-per-node=512MB",
            "task.concurrency=2",
            "web-ui.enabled=false",
            ""]))
        (etc / "jvm.config").write_text("\n".join([
            "-server", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
            "-XX:ReservedCodeCacheSize=256M", "-Djdk.attach.allowAttachSelf=true", "-Dfile.encoding=UTF-8",
            "-XX:+EnableDynamicAgentLoading", ""]))
        (etc / "log.properties").write_text("io.trino=WARN\n")
        self.log = workdir / "server.log"
        java_home = Path(jvm.java(25)).parents[1]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(home / "bin" / "launcher"), "run", f"--etc-dir={etc}", f"--data-dir={data}",
                 f"--jvm-dir={java_home}"],
                stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
        try:
            self._wait_started(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_started(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Trino exited ({self.process.returncode}):\n{self.log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.host}:{self.port}/v1/info", timeout=2) as r:
                    if not json.load(r)["starting"]:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise TimeoutError(f"Trino did not start in {timeout:.0f} s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
