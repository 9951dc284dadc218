"""stack.env is the one file a developer sources before qimctl (README "Other commands";
qim/dev/stack_env.py CLIENT_VARS): on a stack with an object store it carries the
QIM_S3_* variables, so `qimctl audit media` (docs/operations.md "Media and object
storage") runs after sourcing it instead of stopping with "QIM_S3_BUCKET is required"."""

from __future__ import annotations

import os
import subprocess
import sys

from qim.config.env import Env
from qim.config.s3 import S3Config
from qim.dev.stack import stack_up

S3 = {
    "QIM_S3_ENDPOINT": "http://127.0.0.1:9",
    "QIM_S3_BUCKET": "qim-media",
    "QIM_S3_REGION": "us-east-1",
    "QIM_S3_ACCESS_KEY": "qimdevkey",
    "QIM_S3_SECRET_KEY": "qimdevsecret",
}


def _read_env(path) -> dict[str, str]:
    """The KEY=VALUE lines of an env file."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_stack_env_carries_the_object_store_for_qimctl(tmp_path) -> None:
    engine_env = {"QIM_REDIS_ADDR": "127.0.0.1:9", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9", **S3}
    stack_up(tmp_path / "stack", engine_env, start=False)  # laid out and saved, nothing started
    sourced = _read_env(tmp_path / "stack" / "stack.env")
    assert {k: sourced.get(k) for k in S3} == S3
    assert S3Config.from_env(Env(sourced)).bucket == "qim-media"

    # qimctl with only what stack.env gives: past its configuration, it fails only on the
    # unreachable store and Redis of this layout (exit 2, "cannot run"), not on a missing variable
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    done = subprocess.run(
        [sys.executable, "-m", "qim.cli.qimctl", "audit", "media"],
        env={**env, **sourced},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "qimctl audit media: cannot run" in done.stderr, done.stderr


def test_stack_env_without_an_object_store_has_no_s3_variables(tmp_path) -> None:
    stack_up(tmp_path / "stack", {"QIM_REDIS_ADDR": "127.0.0.1:9", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9"}, start=False)
    assert not any(k.startswith("QIM_S3_") for k in _read_env(tmp_path / "stack" / "stack.env"))
