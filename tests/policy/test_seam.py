"""The send-policy seam on its own (qim/policy; docs/decisions/0099): loading
QIM_SEND_POLICY, the verdicts and what they raise, the binding to (sender,
client_message_id), a policy that fails or does not answer, and arrival order in a Line.
The real send paths over real engines: tests/e2e/test_send_policy.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qim.errors import ConfigError, ErrorCode, RequestError
from qim.policy import ACCEPT, POLICY_TIMEOUT_S, Hold, PolicyHeld, PolicySeam, Refuse, SendFacts, load_policy
from qim.policy.line import Line

ROOT = Path(__file__).resolve().parents[2]


def facts(body: bytes, cmid: bytes = b"c" * 16, user: int = 7, kind: str = "direct") -> SendFacts:
    return SendFacts(kind=kind, tenant=0, user_id=user, device_id=1, conversation_id=b"\x01" * 16,
                     message_type=1, custom_type=b"", body=body, client_message_id=cmid)


async def never_committed() -> bool:
    return False


async def committed() -> bool:
    return True


class Scripted:
    """A policy answering from a list, counting its calls."""

    def __init__(self, *answers) -> None:
        self.answers, self.calls = list(answers), 0

    def __call__(self, f: SendFacts):
        self.calls += 1
        return self.answers.pop(0)


def test_an_unset_policy_is_no_policy_and_a_bad_one_is_refused_by_name():
    assert load_policy("") is None
    assert load_policy("tests.policy.policies:by_content").__name__ == "by_content"
    for spec, words in (("tests.policy.policies", "expected 'module:callable'"),
                        ("tests.policy.nowhere:x", "does not load: ModuleNotFoundError"),
                        ("tests.policy.policies:missing", "has no callable 'missing'"),
                        ("tests.policy.policies:NOT_CALLABLE", "has no callable 'NOT_CALLABLE'")):
        with pytest.raises(ConfigError, match="QIM_SEND_POLICY") as info:
            load_policy(spec)
        assert words in str(info.value)
    assert not PolicySeam(None).active and PolicySeam(Scripted()).active


@pytest.mark.parametrize("service", ["qim-room", "qim-writer"])
def test_a_service_refuses_to_start_with_a_policy_that_does_not_load(service, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QIM_REDIS_ADDR": "127.0.0.1:1", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:1",
           "QIM_INTERNAL_PLAINTEXT_DEV": "1", "QIM_SEND_POLICY": "tests.policy.policies:NOT_CALLABLE"}
    out = subprocess.run([str(Path(sys.executable).parent / service)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2, out
    assert "QIM_SEND_POLICY='tests.policy.policies:NOT_CALLABLE'" in out.stderr and "no callable" in out.stderr


async def test_accept_passes_and_a_refusal_is_remembered_for_the_same_send():
    policy = Scripted(Refuse("no"), ACCEPT)
    seam = PolicySeam(policy)
    for _ in range(2):  # the retry gets the same refusal without asking the policy again
        with pytest.raises(RequestError) as info:
            await seam.check(facts(b"x"), never_committed)
        assert (info.value.code, info.value.message) == (ErrorCode.POLICY_REFUSED, "no")
    assert policy.calls == 1
    with pytest.raises(RequestError) as info:  # the refused cmid with another content
        await seam.check(facts(b"other"), never_committed)
    assert info.value.code == ErrorCode.CONFLICT
    await seam.check(facts(b"x", cmid=b"d" * 16), never_committed)  # another send: asked, accepted
    assert policy.calls == 2
    with pytest.raises(RequestError):  # another sender's send with the same cmid is its own
        await PolicySeam(Scripted(Refuse("no"))).check(facts(b"x", user=8), never_committed)


async def test_a_refusal_of_a_send_already_committed_keeps_the_acceptance():
    seam = PolicySeam(Scripted(Refuse("changed its mind"), Refuse("again")))
    await seam.check(facts(b"x"), committed)
    await seam.check(facts(b"x"), committed)


async def test_a_hold_is_not_remembered_and_carries_its_clamped_hint():
    policy = Scripted(Hold(250, "review"), Hold(10**9), Hold(0), ACCEPT)
    seam = PolicySeam(policy)
    hints = []
    for _ in range(3):
        with pytest.raises(PolicyHeld) as info:
            await seam.check(facts(b"x"), never_committed)
        assert info.value.code == ErrorCode.UNAVAILABLE
        hints.append(info.value.retry_after_ms)
    assert hints == [250, 60_000, 1]
    await seam.check(facts(b"x"), never_committed)  # asked again each time: accepted now
    assert policy.calls == 4


async def test_a_policy_that_fails_hangs_or_answers_garbage_holds_the_send():
    async def hangs(f):
        await asyncio.sleep(60)

    def fails(f):
        raise RuntimeError("boom")

    for policy in (fails, lambda f: "yes", hangs):
        with pytest.raises(PolicyHeld) as info:
            await asyncio.wait_for(PolicySeam(policy).check(facts(b"x"), never_committed), POLICY_TIMEOUT_S + 30)
        assert info.value.retry_after_ms > 0


async def test_a_refusal_is_forgotten_after_the_idempotency_horizon():
    now = [0.0]
    policy = Scripted(Refuse("no"), ACCEPT)
    seam = PolicySeam(policy, memo_ttl_s=10, clock=lambda: now[0])
    with pytest.raises(RequestError):
        await seam.check(facts(b"x"), never_committed)
    now[0] = 11.0
    await seam.check(facts(b"x"), never_committed)
    assert policy.calls == 2


async def test_a_line_applies_in_arrival_order_whatever_order_the_verdicts_come_in():
    line, applied = Line(), []

    async def post(n: int, verdict_after: float, refused: bool = False) -> None:
        place = line.place("room")
        try:
            await asyncio.sleep(verdict_after)
            if refused:
                return
            await place.wait()
            applied.append(n)
        finally:
            place.release()

    await asyncio.gather(post(1, 0.05), post(2, 0.0, refused=True), post(3, 0.0), post(4, 0.02))
    assert applied == [1, 3, 4]
    assert len(line) == 0
