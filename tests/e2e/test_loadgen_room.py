"""`qim-loadgen room` against the real stack (docs/perf.md "Rooms"): 30 members, two of
them posting, every member told every post once in room_seq order; the JSON report
carries the same figures as the last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_room_step_checks_every_member_got_every_post_once_in_order(stack, tmp_path):
    report = tmp_path / "room.json"
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "room", "--gateway", stack.gateway_addr, "--token-key",
         stack.token_key, "--members", "30", "--posters", "2", "--rate", "20", "--duration", "3",
         "--ca-file", stack.ca_file, "--json", str(report)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("loadgen_room: "), proc.stdout[-2000:] + proc.stderr[-3000:]
    fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    assert fields["members"] == "30" and fields["posts"] == "60" and fields["acked"] == "60", lines[-1]
    assert fields["deliveries"] == fields["expected"] == str(30 * 60), lines[-1]
    assert (fields["lost"], fields["duplicated"], fields["out_of_order"]) == ("0", "0", "0"), lines[-1]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert doc["deliveries"] == 1800 and doc["delivery_ms"]["count"] >= 1700, doc


def test_room_step_refuses_bad_arguments_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "qim.cli.loadgen", "room", "--gateway", "127.0.0.1:1",
                           "--token-key", "x", "--members", "2", "--posters", "3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--posters" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
