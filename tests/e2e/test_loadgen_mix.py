"""`qim-loadgen rate --mix` (issue 37 "Load", qim/cli/loadgen_mix.py) against the real
stack: bad --mix values exit 2 naming the option before anything connects; a short run
sends replies, mentions, reactions and typing, counts each kind apart (REACT and TYPING
outside the send loss ledger) and the ledger stays clean."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


def _rate(stack, *extra, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "rate", "--gateway", stack.gateway_addr, "--token-key",
         stack.token_key, "--ca-file", stack.ca_file, "--sdk-clients", "0", *extra],
        capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


@pytest.mark.parametrize("bad", ["replies=2", "likes=0.1", "reactions=0.6,typing=0.6", "typing=x",
                                 "typing=0.1,typing=0.2", "reactions"])
def test_bad_mix_exits_2_naming_the_option(stack, bad):
    proc = _rate(stack, "--rate", "10", "--duration", "1", "--mix", bad, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # one line of ours naming the option (not argparse's usage text), nothing connected
    assert proc.stderr.startswith("qim-loadgen rate: --mix ") and proc.stdout == "", proc.stderr


def test_mix_sends_and_counts_each_kind(stack, tmp_path):
    report = tmp_path / "mix.json"
    proc = _rate(stack, "--rate", "60", "--duration", "6", "--pairs", "3", "--json", str(report),
                 "--min-arrival", "0.9",  # the kinds are under test, not the rate (a busy CI machine)
                 "--mix", "replies=0.15,mentions=0.15,reactions=0.3,typing=0.15")
    lines = proc.stdout.strip().splitlines()
    mix_line = next((x for x in lines if x.startswith("mix: ")), None)
    assert mix_line is not None, proc.stdout[-2000:] + proc.stderr[-3000:]
    m = re.fullmatch(r"mix: replies=(\d+)/(\d+) mentions=(\d+)/(\d+) reactions=(\d+)/(\d+)/(\d+) "
                     r"typing=(\d+)/(\d+)/(\d+) unanswered=0", mix_line)
    assert m, mix_line
    rs, ra, ms, ma, xs, xa, xr, ts, td, tt = map(int, m.groups())
    assert rs > 0 and ra == rs and ms > 0 and ma == ms, mix_line
    assert xs > 0 and xa == xs and xr == 0, mix_line + proc.stderr[-2000:]
    # 3 conversations, at most one TYPING each per 2 s passes: the rest are throttled, none refused
    assert ts > 0 and td > 0 and td + tt == ts, mix_line
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads(report.read_text())
    # REACT and TYPING are operations of the schedule but not messages: the ledger saw only sends
    assert doc["total"]["sent"] + xs + ts == round(60 * 6), doc["total"]
    assert doc["total"]["acked"] == doc["total"]["sent"]
    assert doc["verdict"] == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}
    assert doc["mix"]["reactions"] == {"sent": xs, "acked": xa, "refused": 0}
    assert doc["mix"]["typing_throttled"] == tt and doc["mix"]["error_codes"] == {}
