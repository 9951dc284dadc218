"""`qim-loadgen rate --sdk-clients 2` against the real stack: the SDK lane's
two paired clients send to each other under the frame-level load, and their view is
checked (qim/cli/loadgen_sdkcheck.py); the JSON report carries the lane's verdict. The
same run has a group sender (`--group-members 50`): its ACKs are counted apart and the
frame-level ledger stays clean."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys


def test_rate_with_sdk_lane_checks_the_clients_view(stack, tmp_path):
    report = tmp_path / "rate.json"
    proc = subprocess.run(
        [sys.executable, "-m", "qim.cli.loadgen", "rate", "--gateway", stack.gateway_addr, "--token-key",
         stack.token_key, "--rate", "60", "--duration", "5", "--pairs", "4", "--sdk-clients", "2",
         "--group-members", "50", "--ca-file", stack.ca_file, "--json", str(report),
         # the client's view is under test, not the rate: a 5 s run on a busy CI machine
         # read arrival 0.967 (its last tick 170 ms late) with every message delivered
         "--min-arrival", "0.9"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-4000:]
    lane = next((x for x in lines if x.startswith("sdk_lane: ")), None)
    assert lane is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    fields = dict(kv.split("=") for kv in lane.split()[1:])
    # 60 msg/s, 4 frame-level senders + 2 SDK senders: the lane carries 2/6 of it for 5 s
    assert int(fields["clients"]) == 2 and int(fields["acked"]) >= 0.95 * 60 * 5 * 2 / 6, lane
    assert int(fields["delivered"]) == int(fields["acked"]) and fields["failures"] == "0", lane + proc.stderr[-3000:]
    assert re.search(r" sdk_sent=\d+ sdk_failures=0$", lines[-1]), lines[-1]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert doc["sdk"]["checked"] is True and doc["sdk"]["failures"] == 0
    assert doc["sdk"]["sent"] == int(fields["acked"])
    assert doc["total"]["acked"] == doc["total"]["sent"] > 0 and doc["segments"]
    group = doc["group"]
    assert group["members"] == 50 and group["acked"] == group["sent"] > 0 and group["errors"] == 0, group
    assert any(x.startswith("group: members=50 ") for x in lines), proc.stdout[-2000:]
    assert doc["verdict"] == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}
    assert len(doc["hist"]["ack"]) == len(doc["hist_edges_ms"]) - 1 and sum(doc["hist"]["ack"]) == doc["total"]["acked"]
