"""Every program in examples/ runs against the real stack and prints what it should
("example programs in examples/ that run as tests against a private stack")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.docrun import ROOT, client_env

EXPECTED = {
    "direct_chat.py": ["bob got #", "今晚吃火锅吗？🍲\\n七点，老地方", "unread 2 (exact: True)",
                       "after bob's reply: unread 0", "recalled: state=1 body=b''"],
    "two_devices.py": ["unread on both devices: 3", "laptop told by sync", "laptop unread now: 0",
                      "friend unread: 1, laptop unread: 0"],
    "group_chat.py": ["created", "(owner)", "'message 11'", "demo.event-card {'title': '周末爬山'",
                      "still listed: True"],
    "echo_bot.py": ["friend got: ['echo: hello bot', 'echo: 你好 🤖']", "bot: stopped by SIGINT"],
}


def test_every_example_is_tested():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(stack, tmp_path, name):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name)], env=client_env(stack), cwd=tmp_path,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    for text in EXPECTED[name]:
        assert text in done.stdout, f"{text!r} not in:\n{done.stdout}"
