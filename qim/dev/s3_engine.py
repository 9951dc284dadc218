"""A private S3-compatible object store for development and tests: s3proxy (Apache-2.0)
with jclouds' filesystem backend, from Maven Central (issue 40; docs/decisions/0137).

The jars come from `dev/s3proxy/pom.xml` through Maven into a cache reused between runs
(`~/.cache/qim/s3proxy-<version>`, as Kafka's and Cassandra's). Each start has its own
directory (objects under `dir/data`, one directory per bucket, one file per object) and
its own port; the access key and secret are made once per directory and kept in
`dir/credentials.json`, so a restart serves the same objects to the same clients. The
MediaService reaches it, like any production S3 store, through QIM_S3_* variables
(qim/stores/s3.py).
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.request
from pathlib import Path

from qim.dev._proc import pick_ports
from qim.dev.engine import Engine
from qim.dev.maven import REPO_ROOT, ensure_jars
from qim.errors import EngineError

# keep in step with <s3proxy.version> in dev/s3proxy/pom.xml; it names the jar cache
S3PROXY_VERSION = "2.6.0"
POM = REPO_ROOT / "dev" / "s3proxy" / "pom.xml"
HEAP = "-Xmx256m"
REGION = "us-east-1"  # s3proxy answers any region; boto3 signs with this one

LOGBACK_XML = """<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d %level %logger{{20}} %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="file"/></root>
</configuration>
"""


def s3proxy_cache_dir() -> Path:
    """Jar cache: $QIM_S3PROXY_CACHE or ~/.cache/qim/s3proxy-<version>."""
    env = os.environ.get("QIM_S3PROXY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "qim" / f"s3proxy-{S3PROXY_VERSION}"


def ensure_s3proxy_jars(cache: Path | None = None) -> Path:
    """The directory of s3proxy's jars (`<cache>/lib/*.jar`), fetched with Maven if
    needed (qim.dev.maven.ensure_jars). Raises EngineError if Maven fails."""
    return ensure_jars("s3proxy", POM, cache or s3proxy_cache_dir(), "s3proxy-*.jar")


class S3Engine(Engine):
    """s3proxy in `dir` on 127.0.0.1:`ports["main"]` (plain HTTP, loopback only).

    `.endpoint` is "http://127.0.0.1:PORT"; `.access_key`/`.secret_key` the credentials
    every request is signed with (AWS signature v2 or v4); `.env()` the QIM_S3_*
    variables that point the MediaService at it. A JVM: SIGTERM exits 143.
    """

    name = "s3"
    start_timeout = 60.0
    exit_code_on_term = 143

    @property
    def endpoint(self) -> str:
        """The store's base URL."""
        return f"http://{self.addr}"

    def _credentials(self) -> dict[str, str]:
        path = self.dir / "credentials.json"
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            creds = {"access_key": "qimdev" + secrets.token_hex(4), "secret_key": secrets.token_urlsafe(24)}
            path.write_text(json.dumps(creds))
            path.chmod(0o600)
        return json.loads(path.read_text())

    @property
    def access_key(self) -> str:
        """The access key id (made once per directory)."""
        return self._credentials()["access_key"]

    @property
    def secret_key(self) -> str:
        """The secret access key (made once per directory; never logged)."""
        return self._credentials()["secret_key"]

    def env(self, bucket: str = "qim-media") -> dict[str, str]:
        """QIM_S3_ENDPOINT, _BUCKET, _REGION, _ACCESS_KEY, _SECRET_KEY for this store."""
        return {
            "QIM_S3_ENDPOINT": self.endpoint,
            "QIM_S3_BUCKET": bucket,
            "QIM_S3_REGION": REGION,
            "QIM_S3_ACCESS_KEY": self.access_key,
            "QIM_S3_SECRET_KEY": self.secret_key,
        }

    @property
    def log_paths(self) -> list[Path]:
        """stdout and s3proxy's own log."""
        return [self.dir / "stdout.log", self.dir / "s3proxy.log"]

    def _prepare(self) -> None:
        # a properties file (not argv) so that restart() serves the same objects
        creds = self._credentials()
        (self.dir / "data").mkdir(exist_ok=True)
        lines = [
            f"s3proxy.endpoint=http://127.0.0.1:{self.ports['main']}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={creds['access_key']}",
            f"s3proxy.credential={creds['secret_key']}",
            "jclouds.provider=filesystem-nio2",
            f"jclouds.filesystem.basedir={self.dir / 'data'}",
            f"jclouds.identity={creds['access_key']}",
            f"jclouds.credential={creds['secret_key']}",
            # a development web page (any loopback port, as the gateway's dev WebSocket origins)
            # PUTs large files' parts to presigned URLs (web/src/sdk/mediaparts.ts; decision 0146);
            # regexes, space-separated, the backslashes doubled for the properties format
            r"s3proxy.cors-allow-origins=http://127\\.0\\.0\\.1:[0-9]+ http://localhost:[0-9]+",
            "s3proxy.cors-allow-methods=GET HEAD PUT",
            "s3proxy.cors-allow-headers=content-type Content-Type",  # compared as written: both spellings
            "s3proxy.cors-exposed-headers=ETag",
        ]
        conf = self.dir / "s3proxy.conf"
        conf.write_text("\n".join(lines) + "\n")
        conf.chmod(0o600)
        (self.dir / "logback.xml").write_text(LOGBACK_XML.format(log=self.dir / "s3proxy.log"))

    def _command(self) -> list[str]:
        lib = ensure_s3proxy_jars()
        return [
            "java",
            HEAP,
            f"-Dlogback.configurationFile={self.dir / 'logback.xml'}",
            "-cp",
            f"{lib}/*",
            "org.gaul.s3proxy.Main",
            "--properties",
            str(self.dir / "s3proxy.conf"),
        ]

    def _check_ready(self) -> bool:
        """Jetty answers an unsigned request with S3's 403 AccessDenied: the S3 handler is up."""
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=2)
        except urllib.error.HTTPError as e:
            return e.code == 403
        return True


def start_s3(
    dir: Path | str, port: int | None = None, timeout: float | None = None, die_with_parent: bool = False
) -> S3Engine:
    """Start a private s3proxy under `dir` (created) on `port` (default: a free one) and
    wait until it serves S3. Returns the running S3Engine; EngineError (with the log
    tail) if it cannot start."""
    ensure_s3proxy_jars()
    eng = S3Engine(Path(dir), {"main": port or pick_ports(1)[0]}, die_with_parent=die_with_parent)
    try:
        return eng.start(timeout)
    except OSError as e:
        raise EngineError(f"s3: cannot start in {dir}: {e}") from e
