"""`make demo` in small: the replay through the real stack (DESIGN.md §12).

The `stack` fixture (tests/e2e/conftest.py) runs the services and exposes
`.gateway_addr` ('host:port') and `.token_secret`. `--limit 10` with the languages
interleaved alternates english and chinese; dialogues 4 and 9 are small groups, the
others cycle online, offline, cut by index: both languages go through every mode.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

LINE = re.compile(r"^replay: conversations=(\d+) messages=(\d+) delivered=(\d+) lost=(\d+) "
                  r"duplicated=(\d+) out_of_order=(\d+)$")


def test_replay_both_languages_all_modes_and_groups(stack):
    secret = stack.token_secret
    secret = secret.decode() if isinstance(secret, bytes) else str(secret)
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "replay", "--gateway", stack.gateway_addr,
         "--token-secret", secret, "--langs", "english,chinese", "--limit", "10", "--concurrency", "3",
         "--group-every", "5"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-4000:]
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    conversations, messages, delivered, lost, duplicated, out_of_order = map(int, m.groups())
    for mode, n in (("online", 3), ("offline", 2), ("cut", 3), ("group", 2)):
        assert f"'{mode}': {n}" in proc.stderr, proc.stderr[-2000:]
    assert conversations == 10 and messages >= 10, lines[-1]
    assert (lost, duplicated, out_of_order) == (0, 0, 0), proc.stderr[-4000:]
    assert delivered == messages
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_rate_loadgen_smoke_reports_segments_and_a_final_line(stack):
    secret = stack.token_secret
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "rate", "--gateway", stack.gateway_addr, "--token-secret",
         secret if isinstance(secret, str) else secret.decode(), "--rate", "40", "--duration", "6", "--pairs", "4"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("segment t=") for line in lines), proc.stdout + proc.stderr[-2000:]
    final = re.match(r"^loadgen: target_rate=40.0 duration_s=6.0 sent=(\d+) acked=(\d+) errors=(\d+) "
                     r"arrival=([\d.]+) push_coverage=([\d.]+) ack_p99_ms=([\d.]+) e2e_p99_ms=", lines[-1])
    assert final, lines[-1]
    sent, acked, errors = (int(final.group(i)) for i in (1, 2, 3))
    assert sent >= 0.99 * 40 * 6 and acked == sent and errors == 0, lines[-1] + proc.stderr[-2000:]
    assert proc.returncode == 0
