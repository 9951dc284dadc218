"""Server jars from Maven Central, fetched once into a cache (Kafka, Cassandra).

A small pom under `dev/<engine>/pom.xml` names the server artifact; Maven's
dependency plugin copies it and its runtime dependencies into `<cache>/lib`. Nothing
is downloaded from anywhere but Maven Central (and Debian for java/maven).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import shutil
import subprocess
import time
from pathlib import Path

from qim.dev import progress
from qim.dev._proc import apt_install
from qim.errors import EngineError

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


def ensure_jars(label: str, pom: Path, cache: Path, probe_glob: str) -> Path:
    """Return `<cache>/lib` holding the jars of `pom`, fetching them with Maven if needed.

    A `.complete` marker holds the pom's sha256, so an edited pom refetches; a file
    lock makes parallel test sessions wait for one download; `probe_glob` (e.g.
    "kafka_2.13-*.jar") must match in the result. Installs java/maven from Debian if
    missing (root only). Raises EngineError (with Maven's output tail) on failure.
    """
    try:
        return _ensure_jars(label, pom, cache, probe_glob)
    except OSError as e:
        raise EngineError(f"{label}: cannot prepare the jar cache {cache}: {e}") from e


def _ensure_jars(label: str, pom: Path, cache: Path, probe_glob: str) -> Path:
    lib = cache / "lib"
    if not pom.exists():
        raise EngineError(f"{label}: {pom} not found (run from a QIM source checkout)")
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    marker = cache / ".complete"
    if marker.exists() and marker.read_text().strip() == digest:
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text().strip() == digest:
            return lib  # another process fetched them while we waited
        progress.note(f"fetching the {label} jars with Maven (once; cached in {cache})")
        ensure_java_and_maven()
        tmp = cache / "lib.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = ["mvn", "-q", "-B", "-f", str(pom), DEPENDENCY_PLUGIN,
               f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
        log.info("fetching %s jars: %s", label, " ".join(cmd))
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not any(tmp.glob(probe_glob)):
            raise EngineError(f"{label}: Maven could not fetch the server jars "
                              f"(exit {r.returncode}):\n{(r.stdout + r.stderr)[-4000:]}")
        shutil.rmtree(lib, ignore_errors=True)
        tmp.rename(lib)
        marker.write_text(digest + "\n")
        log.info("%s jars ready in %s (%.1fs)", label, lib, time.monotonic() - t0)
    return lib


def ensure_java_and_maven() -> None:
    """Install Java 17 and Maven from Debian if `java` or `mvn` is missing."""
    missing = [pkg for exe, pkg in (("java", "openjdk-17-jre-headless"), ("mvn", "maven"))
               if not shutil.which(exe)]
    if missing:
        apt_install(missing)
