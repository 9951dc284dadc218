"""`make demo` in small: the replay through the real stack (docs/design.md §12).

The `stack` fixture (tests/e2e/conftest.py) runs the services and exposes
`.gateway_addr` ('host:port') and `.token_key` (the development key's path). `--limit 10` with the languages
interleaved alternates english and chinese; dialogues 4 and 9 are small groups, the
others cycle online, offline, cut by index: both languages go through every mode. The
first dialogues of each kind carry every threshold body size (qim/cli/bodies.py),
among them one 1 MiB + 1 body per kind that the SDK must refuse locally; dialogues 2
and 9 recall their first message; dialogue 1 and the listener of 4 get a second device that
marks the conversation read.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

LINE = re.compile(r"^replay: conversations=(\d+) messages=(\d+) delivered=(\d+) lost=(\d+) "
                  r"duplicated=(\d+) out_of_order=(\d+) corrupt=(\d+) unread_wrong=(\d+)$")


def test_replay_both_languages_all_modes_and_groups(stack):
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "replay", "--gateway", stack.gateway_addr,
         "--token-key", stack.token_key, "--langs", "english,chinese", "--limit", "10", "--concurrency", "3",
         "--group-every", "5", "--ca-file", stack.ca_file],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-4000:]
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    conversations, messages, delivered, lost, duplicated, out_of_order, corrupt, unread_wrong = map(int, m.groups())
    summary = " ".join(proc.stderr.split())  # the summary table on stderr (qim/cli/replay_progress.py)
    modes = re.search(r" modes ((?:\w+: \d+,? )+)", summary + " ")
    assert modes, proc.stderr[-2000:]
    assert modes.group(1).strip() == "cut: 3, group: 2, offline: 2, online: 3", proc.stderr[-2000:]
    assert " recalled 2 " in summary, proc.stderr[-2000:]  # dialogue 2 (cut) and 9 (group)
    # 20 text turns and 41 threshold bodies (19 direct + 22 group sizes)
    assert conversations == 10 and messages >= 61, lines[-1]
    assert lines[-2].startswith("replay: over_limit_refused=2 (as intended") and lines[-2].endswith(" unsent=0"), \
        proc.stderr[-4000:]
    assert (lost, duplicated, out_of_order, corrupt, unread_wrong) == (0, 0, 0, 0, 0), proc.stderr[-4000:]
    assert delivered == messages
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_rate_loadgen_smoke_reports_segments_and_a_final_line(stack):
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "rate", "--gateway", stack.gateway_addr, "--token-key",
         stack.token_key, "--rate", "40", "--duration", "6", "--pairs", "4", "--ca-file", stack.ca_file,
         "--sdk-clients", "0"],  # the frame-level lane alone (the SDK lane: test_loadgen_sdk_lane.py)
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("segment t=") for line in lines), proc.stdout + proc.stderr[-2000:]
    final = re.match(r"^loadgen: target_rate=40.0 duration_s=6.0 sent=(\d+) acked=(\d+) errors=(\d+) "
                     r"arrival=([\d.]+) push_coverage=([\d.]+) ack_p99_ms=([\d.]+) e2e_p99_ms=([\d.]+) "
                     r"lost=(\d+) duplicated=(\d+) corrupt=(\d+) out_of_order=(\d+)$", lines[-1])
    assert final, lines[-1]
    sent, acked, errors = (int(final.group(i)) for i in (1, 2, 3))
    assert sent >= 0.99 * 40 * 6 and acked == sent and errors == 0, lines[-1] + proc.stderr[-2000:]
    # verified on what the receivers pulled with their own cursors
    assert [int(final.group(i)) for i in (8, 9, 10, 11)] == [0, 0, 0, 0], lines[-1] + proc.stderr[-2000:]
    assert proc.returncode == 0
