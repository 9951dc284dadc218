"""The replay's totals (qim/cli/replay_common.Tally): what makes a run fail, and the two
output lines."""

from __future__ import annotations

from qim.cli.replay_common import EXPECTED_REFUSAL, Tally
from qim.cli.verify import Verdict


def clean(n: int = 3) -> Tally:
    t = Tally(conversations=1, messages=n)
    t.add_verdict(Verdict(delivered=n))
    return t


def test_clean_run_with_intended_refusals_is_ok_and_lines_read_right():
    t = clean()
    t.skip(EXPECTED_REFUSAL)
    total = Tally()
    total.add(t), total.add(clean(2))
    assert total.ok
    assert total.not_sent_line() == ("replay: over_limit_refused=1 (as intended: bodies above the size limit, "
                                     "refused by the SDK before sending) unsent=0")
    assert total.line() == ("replay: conversations=2 messages=5 delivered=5 lost=0 duplicated=0 out_of_order=0 "
                            "corrupt=0 unread_wrong=0")
    assert Tally().not_sent_line().endswith(" unsent=0")
    t = clean()
    t.skip("send failed: SendTimeout UNAVAILABLE", 2)
    assert t.not_sent_line().startswith("replay: over_limit_refused=0 ")
    assert t.not_sent_line().endswith(" unsent=2 (send failed: SendTimeout UNAVAILABLE: 2)")


def test_every_fault_fails_the_run():
    for name in ("lost", "duplicated", "out_of_order", "corrupt", "unread_wrong"):
        t = clean()
        setattr(t, name, 1)
        assert not t.ok, name
    t = clean()
    t.delivered -= 1
    assert not t.ok
    t = clean()
    t.skip("send failed: SendTimeout UNAVAILABLE", 2)  # unsent for another reason
    assert not t.ok
    t = clean()
    t.harness["cut mode: a send resolved without a reconnect"] = 1
    assert not t.ok
