"""A private stack whose writer and RoomWriter load the test send policy
tests.policy.switch:by_switch (b"spam" refused by by_content, b"once-held" held once,
bodies with b"switch" answered from a file): the one setup the send-policy, desktop and
web refusal tests share. Kept apart from switch.py, which the writer imports."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.fixtures import running_stack

ROOT = Path(__file__).resolve().parents[2]


def switch_file(tmp_path_factory: Any) -> Path:
    """A new file steering tests.policy.switch for sends with b"switch" in the body,
    saying "accept" until a test writes "hold" or "refuse:<reason>" into it."""
    path = tmp_path_factory.mktemp("switch") / "verdict"
    path.write_text("accept")
    return path


@contextmanager
def policy_stack_of(tmp_path_factory: Any, switch: Path) -> Iterator[Any]:
    """running_stack with QIM_SEND_POLICY=tests.policy.switch:by_switch steered by the
    file `switch` (PYTHONPATH: the policy module lives under tests/); stopped after."""
    env = {
        "QIM_SEND_POLICY": "tests.policy.switch:by_switch",
        "POLICY_SWITCH_FILE": str(switch),
        "PYTHONPATH": str(ROOT),
    }
    with running_stack(tmp_path_factory.mktemp("policy"), extra_env=env) as st:
        yield st
