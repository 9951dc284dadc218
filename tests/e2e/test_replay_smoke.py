"""`make demo` in small: the replay through the real stack (DESIGN.md §12).

The `stack` fixture (tests/e2e/conftest.py) runs the services and exposes
`.gateway_addr` ('host:port') and `.token_secret`. `--limit 6` with the languages
interleaved gives english, chinese, english, chinese, english, chinese with modes
online, offline, cut, online, offline, cut: each language goes through every mode.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

LINE = re.compile(r"^replay: conversations=(\d+) messages=(\d+) delivered=(\d+) lost=(\d+) "
                  r"duplicated=(\d+) out_of_order=(\d+)$")


def test_replay_three_english_three_chinese_all_modes(stack):
    secret = stack.token_secret
    secret = secret.decode() if isinstance(secret, bytes) else str(secret)
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "replay", "--gateway", stack.gateway_addr,
         "--token-secret", secret, "--langs", "english,chinese", "--limit", "6", "--concurrency", "3"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-4000:]
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    conversations, messages, delivered, lost, duplicated, out_of_order = map(int, m.groups())
    assert "'online': 2" in proc.stderr and "'offline': 2" in proc.stderr and "'cut': 2" in proc.stderr
    assert conversations == 6 and messages >= 6, lines[-1]
    assert (lost, duplicated, out_of_order) == (0, 0, 0), proc.stderr[-4000:]
    assert delivered == messages
    assert proc.returncode == 0, proc.stderr[-4000:]
