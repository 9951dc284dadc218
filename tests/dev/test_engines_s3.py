"""The development engine set's object store (qim/dev/engines_s3.py; issue 40,
docs/decisions/0137, 0139): s3proxy recorded in the engine directory, reused while
healthy, restarted on its port and data, its QIM_S3_* variables in the engine env only
while it runs; and a stack on engines with it runs one MediaService node whose base URL
stack.env gives the SDK (QIM_MEDIA_URL); the docs/sdk.md "Media" example runs as written."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from qim.dev import progress
from qim.dev.engines import EngineSet
from qim.dev.engines_s3 import s3_env, s3_of, s3_up, s3_wanted
from qim.dev.stack import stack_up
from qim.errors import EngineError
from qim.topology import MEDIA
from tests.e2e.docrun import ROOT, client_env, run_python
from tests.media.helpers import running_media


def test_s3_wanted_reads_its_variable(monkeypatch) -> None:
    monkeypatch.delenv("QIM_DEV_WITH_S3", raising=False)
    assert s3_wanted(default=True) and not s3_wanted()
    monkeypatch.setenv("QIM_DEV_WITH_S3", "yes")
    with pytest.raises(EngineError, match="QIM_DEV_WITH_S3 must be 0 or 1"):
        s3_wanted()


async def test_s3_recorded_reused_restarted_and_the_docs_media_example_runs(stack, tmp_path, monkeypatch, capsys) -> None:
    """s3_up records the store, leaves a healthy one alone, brings a stopped one back on
    its port; then the docs/sdk.md "Media" example runs as written against the session
    stack plus a MediaService on that store (what `make up` runs), its URL as stack.env
    gives it (one JVM start less than two tests). `make up` says "s3 ready" once per start."""
    monkeypatch.setattr(progress, "_started", time.monotonic())  # the progress lines `qim-dev engines up` prints
    first = s3_up(tmp_path, die_with_parent=True)
    try:
        assert capsys.readouterr().err.count("s3 ready at") == 1
        assert s3_env(first)["QIM_S3_ENDPOINT"] == first.endpoint and s3_env(first)["QIM_S3_BUCKET"] == "qim-media"
        again = s3_up(tmp_path, die_with_parent=True)
        assert again.pid == first.pid  # healthy: left alone
        recorded = s3_of(tmp_path)
        assert recorded is not None and recorded.pid == first.pid and recorded.ports == first.ports
        first.stop()
        assert s3_env(s3_of(tmp_path)) == {}  # not running: no variables pointing at a dead port
        capsys.readouterr()
        back = s3_up(tmp_path, die_with_parent=True)
        assert back.ports == first.ports and back.pid != first.pid and back.healthy()
        assert capsys.readouterr().err.count("s3 ready at") == 1

        env = {**stack.env, **s3_env(back), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
        async with running_media(env) as (_node, _http, base):
            (example,) = re.findall(r"```python media-stack\n(.*?)```", (ROOT / "docs" / "sdk.md").read_text(), re.S)
            done = await asyncio.to_thread(run_python, example, client_env(stack, QIM_MEDIA_URL=base), tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        for promised in re.findall(r"# prints: (.*)$", example, flags=re.M):
            assert promised.strip() in done.stdout, (promised, done.stdout)
    finally:
        eng = s3_of(tmp_path)
        if eng is not None:
            eng.stop()


def test_stack_on_an_object_store_plans_one_media_node_and_its_url(tmp_path) -> None:
    s3 = {"QIM_S3_ENDPOINT": "http://127.0.0.1:9", "QIM_S3_BUCKET": "qim-media"}
    engine_env = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092", **s3}
    st = stack_up(tmp_path / "stack", engine_env, start=False)  # laid out, nothing started
    assert st.names.count(MEDIA) == 1
    url = st.client_env()["QIM_MEDIA_URL"]
    assert (
        url == f"http://{st.metrics[MEDIA]}"
        and f"QIM_MEDIA_URL={url}\n" in (tmp_path / "stack" / "stack.env").read_text()
    )
    plain = stack_up(tmp_path / "plain", {k: v for k, v in engine_env.items() if k not in s3}, start=False)
    assert MEDIA not in plain.names and "QIM_MEDIA_URL" not in plain.client_env()


def test_engine_set_without_s3_has_no_s3_variables(engines) -> None:
    assert engines.s3 is None and not any(k.startswith("QIM_S3_") for k in engines.env())
    loaded = EngineSet.load(engines.dir)
    assert loaded is not None and loaded.s3 is None
