"""The open-source Unity Catalog server (UC OSS 0.6.0) on loopback, beside shardcat: built once,
started and stopped here for the differential test (tests/integration/test_uc_oss_differential.py)
and the benchmark (benchmarks/bench_uc_oss.py).

    python -m benchmarks.uc_oss            # build if needed, start on H2, print its URL, stop on Ctrl-C

Maven Central does not serve `io.unitycatalog:unitycatalog-server` here, so jvm/uc-oss/pom.xml
builds it from its v0.6.0 sources (the same generated models, sources and dependencies as its
build.sbt). Those sources are a tree at $UC_OSS_SOURCE (default
~/.cache/shardcat-jvm/unitycatalog-0.6.0); where it is missing, they are unpacked from a clone of
the unitycatalog repository named by $UC_OSS_GIT (`git archive v0.6.0`).

The server reads etc/conf/{server,hibernate}.properties relative to its working directory, so
each start gets a directory of its own: authorization off (UC OSS's default: no token needed),
and its database either its default embedded H2 (a file there) or PostgreSQL (Hibernate's JDBC
URL, user and password). `UnityCatalogServer -p P` serves Armeria on P + 1 and a URL-transcoding
Vert.x proxy on P; we talk to Armeria directly (one hop less: the faster path for UC OSS).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from .common import ROOT, log
from .processes import Child, spawn, stop

VERSION = "0.6.0"
TAG = f"v{VERSION}"
PROJECT = ROOT / "jvm" / "uc-oss"
BUILD = Path.home() / ".cache" / "shardcat-jvm" / f"uc-oss-{VERSION}-build"    # the pom's ${uc.build}
JAR = BUILD / f"uc-oss-{VERSION}.jar"
MAIN = "io.unitycatalog.server.UnityCatalogServer"
PREFIX = "/api/2.1/unity-catalog"
SOURCE = Path(os.environ.get("UC_OSS_SOURCE", Path.home() / ".cache" / "shardcat-jvm" / f"unitycatalog-{VERSION}"))
START_TIMEOUT = 180.0


def _jvm():
    sys.path.insert(0, str(ROOT))       # tests/jvm.py: class paths of the Maven projects under jvm/
    from tests import jvm
    return jvm


def source_tree() -> Path:
    """UC OSS's v0.6.0 sources (api/, server/src/main, etc/conf), unpacked once."""
    if (SOURCE / "server" / "src" / "main" / "java").is_dir():
        return SOURCE
    git = os.environ.get("UC_OSS_GIT")
    if not git:
        raise FileNotFoundError(f"no UC OSS sources at {SOURCE}; set UC_OSS_SOURCE to a v{VERSION} source tree "
                                "or UC_OSS_GIT to a clone of the unitycatalog repository")
    SOURCE.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={git}", "archive", TAG, "api", "server/src/main", "etc/conf"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "x", "-C", str(SOURCE)], input=archive, check=True)
    return SOURCE


def available() -> str | None:
    """None if UC OSS can be built (or is built) here; else why not."""
    if JAR.exists():
        return None
    try:
        source_tree()
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        return str(e)
    return None


def classpath() -> str:
    """The built server jar and its dependencies (Maven builds it on first use, network once)."""
    if not JAR.exists():
        log(f"  building UC OSS {VERSION} from its sources (jvm/uc-oss; first time only)")
        subprocess.run(["mvn", "-B", "-q", "-f", str(PROJECT / "pom.xml"), "package", "-DskipTests",
                        f"-Duc.source={source_tree()}"], check=True, timeout=1800)
    return os.pathsep.join([str(JAR), _jvm().classpath("uc-oss")])


def jdbc(postgres_url: str) -> tuple[str, str, str]:
    """(JDBC URL, user, password) of a postgresql:// URL; one on a Unix socket (`?host=/dir`, as the
    embedded PostgreSQL's) goes through junixsocket's socket factory."""
    u = urlsplit(postgres_url)
    socket_dir = parse_qs(u.query).get("host", [None])[0]
    if socket_dir and socket_dir.startswith("/"):
        url = (f"jdbc:postgresql://localhost{u.path}?socketFactory=org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg"
               f"&socketFactoryArg={socket_dir}/.s.PGSQL.{u.port or 5432}")
    else:
        url = f"jdbc:postgresql://{u.hostname or '127.0.0.1'}:{u.port or 5432}{u.path}"
    return url, unquote(u.username or ""), unquote(u.password or "")


def write_config(workdir: Path, postgres_url: str | None) -> None:
    """etc/conf of one server: authorization off, H2 (its default) or PostgreSQL, quiet logs."""
    conf = workdir / "etc" / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "server.properties").write_text("server.env=dev\nserver.authorization=disable\n")
    if postgres_url:
        url, user, password = jdbc(postgres_url)
        db = (f"hibernate.connection.driver_class=org.postgresql.Driver\nhibernate.connection.url={url}\n"
              f"hibernate.connection.username={user}\nhibernate.connection.password={password}\n")
    else:
        db = "hibernate.connection.driver_class=org.h2.Driver\n" \
             "hibernate.connection.url=jdbc:h2:file:./etc/db/h2db;DB_CLOSE_DELAY=-1\n"
    (conf / "hibernate.properties").write_text(db + "hibernate.hbm2ddl.auto=update\nhibernate.show_sql=false\n"
                                               "hibernate.archive.autodetection=class\n")
    (conf / "server.log4j2.properties").write_text(
        "rootLogger.level = warn\nrootLogger.appenderRef.console.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d %p %c{1} %m%n\n"
        "logger.server.name = io.unitycatalog.server.UnityCatalogServer\nlogger.server.level = info\n")


def free_port_pair() -> int:
    """A port P with P and P + 1 free on loopback (the server takes both)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s2:
            try:
                s2.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free adjacent ports")


@dataclass
class UcOss:
    child: Child
    base: str           # http://127.0.0.1:PORT (Armeria)
    workdir: Path
    database: str       # "H2" or "PostgreSQL"

    @property
    def api(self) -> str:
        return self.base + PREFIX

    def stop(self) -> None:
        stop(self.child)


def start(workdir: Path, *, postgres_url: str | None = None, heap: str = "2g",
          start_timeout: float = START_TIMEOUT) -> UcOss:
    """UC OSS in `workdir` (its etc/conf written there) on loopback; returns once it answers."""
    cp = classpath()
    workdir.mkdir(parents=True, exist_ok=True)
    write_config(workdir, postgres_url)
    port = free_port_pair()
    (workdir / "classpath.args").write_text(f"-cp {cp}\n")     # an argument file: the log keeps one short line
    argv = [_jvm().java(17), f"-Xmx{heap}", "-Djava.net.preferIPv4Stack=true", f"@{workdir / 'classpath.args'}",
            MAIN, "-p", str(port)]
    child, _ = _spawn_in(workdir, argv, start_timeout)
    base = f"http://127.0.0.1:{port + 1}"
    deadline = time.monotonic() + 30
    while True:     # "started" is logged once Armeria listens; one answered call makes sure
        try:
            with urllib.request.urlopen(base + PREFIX + "/catalogs", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline:
                stop(child)
                raise
            time.sleep(0.2)
    log(f"  UC OSS {VERSION} ({'PostgreSQL' if postgres_url else 'H2'}) listening on {base} (pid {child.pid})")
    return UcOss(child, base, workdir, "PostgreSQL" if postgres_url else "H2")


def _spawn_in(workdir: Path, argv: list[str], start_timeout: float):
    """spawn's `tree` is the child's working directory: UC OSS reads etc/conf from there."""
    return spawn(argv, workdir / "uc-oss.log", r"Unity Catalog server started", "UC OSS", start_timeout,
                 tree=workdir)


def main() -> int:
    import tempfile
    workdir = Path(tempfile.mkdtemp(prefix="uc-oss-"))
    server = start(workdir, postgres_url=sys.argv[1] if len(sys.argv) > 1 else None)
    print(server.api, flush=True)
    try:
        server.child.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
