"""The class paths of the Maven projects under jvm/, for tests that start a JVM (jvm/README.md).

Maven resolves a project's pinned artifacts into its local repository on first use (network
once); the class path it answers is kept under ~/.cache/shardcat-jvm, keyed by the pom's bytes,
so later runs start the JVM without Maven.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

JVM = Path(__file__).resolve().parents[1] / "jvm"
CACHE = Path(os.environ.get("SHARDCAT_JVM_CACHE", Path.home() / ".cache" / "shardcat-jvm"))
JAVA_25 = Path("/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")


def classpath(project: str, *, scope: str = "runtime", timeout: float = 1800) -> str:
    """The class path (os.pathsep-joined jars) of jvm/<project>'s dependencies in `scope`."""
    pom = JVM / project / "pom.xml"
    key = hashlib.sha256(pom.read_bytes() + scope.encode()).hexdigest()[:16]
    kept = CACHE / f"{project}-{key}.classpath"
    if kept.exists() and all(Path(p).exists() for p in kept.read_text().split(os.pathsep) if p):
        return kept.read_text().strip()
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"{project}-{key}.tmp"
    subprocess.run(["mvn", "-B", "-q", "-f", str(pom), "dependency:build-classpath",
                    f"-Dmdep.outputFile={out}", f"-Dmdep.includeScope={scope}"],
                   check=True, timeout=timeout)
    out.replace(kept)
    return kept.read_text().strip()


def java(version: int = 17) -> str:
    """The `java` to run: the system's (17) or the Temurin 25 JDK beside it (Trino needs 25)."""
    if version >= 25:
        if not JAVA_25.exists():
            raise FileNotFoundError(f"no Java {version} runtime at {JAVA_25}")
        return str(JAVA_25)
    return shutil.which("java") or "java"


def package(project: str, *, timeout: float = 1800) -> str:
    """The jar a jvm/<project> builds (`mvn package`: offline first, online if a plugin or dependency is
    missing), kept under the cache keyed by the hash of its pom and sources, so it is rebuilt only
    when they change."""
    root = JVM / project
    digest = hashlib.sha256()
    for path in sorted([root / "pom.xml", *(root / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    kept = CACHE / f"{project}-{digest.hexdigest()[:16]}.jar"
    if kept.exists():
        return str(kept)
    command = ["mvn", "-B", "-q", "-f", str(root / "pom.xml"), "clean", "package"]
    if subprocess.run([*command[:1], "-o", *command[1:]], timeout=timeout).returncode != 0:
        subprocess.run(command, check=True, timeout=timeout)
    jars = sorted((root / "target").glob("*.jar"))
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(jars[0], kept)
    return str(kept)
