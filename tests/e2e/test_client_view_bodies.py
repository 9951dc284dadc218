"""Body sizes at and around every threshold x conversation kind x recipient presence x
path: every message the app is told has its whole body byte-exact.

Sizes (qim/cli/bodies.threshold_sizes): the inline budget of the kind (direct 4096/4097,
group of 3 2730 +- 1, group of 20 409 +- 1 and 512: small bodies not inlined), the 8 KiB
event group and the largest body beside the event overhead, the 4 KiB session head, the
64 KiB chunk and the bodies whose frames are exactly 64 KiB, 1 MiB; 1 MiB + 1 must be
refused locally by the SDK (PAYLOAD_TOO_LARGE) and never told to anyone.
Kinds: direct, group of 3, group of 20. Presence / path:
  online  / mailbox   connected while the messages arrive (push + pull), MessagesAdded
  offline / mailbox   connects afterwards (login pull), MessagesAdded
  online, offline / history  PULL_HISTORY pages both directions, 512 KiB byte budget
  online, offline / head     PULL_SESSION_LIST head of a conversation whose last message
                             has the size: whole up to 4 KiB, above it no body and
                             body_included false (the cap is signalled, never a body)
  rebuild / rebuild   a device whose cursor expired (CURSOR_EXPIRED -> REBUILD), MessagesAdded
  sender / mailbox    the sender's own app, when it is told its own message
One scenario per kind runs once (tests/e2e/clientview.py) on the session `stack` with
fresh users; each parametrized test then names the size and path it judges.
"""

from __future__ import annotations

import asyncio

import pytest

from qim.cli.bodies import OVER_LIMIT, threshold_sizes
from qim.cli.replay_dialogue import refused_locally
from qim.errors import ErrorCode
from tests.e2e.clientview import Scenario

KINDS = {"direct": 2, "group3": 3, "group20": 20}
PATHS = [("online", "mailbox"), ("offline", "mailbox"), ("online", "history"), ("offline", "history"),
         ("online", "head"), ("offline", "head"), ("rebuild", "rebuild"), ("sender", "mailbox")]


def sizes_of(kind: str) -> list[int]:
    return threshold_sizes(KINDS[kind]) + ([512] if kind == "group20" else [])


CASES = [pytest.param(kind, presence, path, size, id=f"{kind}-{presence}-{path}-{size}")
         for kind in KINDS for presence, path in PATHS for size in sizes_of(kind)]


@pytest.fixture(scope="module")
def scenario(stack, engines, tmp_path_factory):
    """kind -> the finished Scenario of that kind (run on first use, once per module)."""
    done: dict = {}

    def get(kind: str) -> Scenario:
        if kind not in done:
            sc = Scenario(stack, engines.redis_addr, tmp_path_factory.mktemp(kind), kind, KINDS[kind], sizes_of(kind))
            try:
                asyncio.run(sc.run())
                done[kind] = sc
            except Exception as exc:  # every test of the kind fails with the same cause, fast
                done[kind] = exc
        if isinstance(done[kind], Exception):
            pytest.fail(f"{kind} scenario failed: {done[kind].__class__.__name__}: {done[kind]}", pytrace=False)
        return done[kind]

    return get


@pytest.mark.parametrize("kind,presence,path,size", CASES)
def test_app_is_told_the_whole_body(scenario, kind, presence, path, size):
    assert scenario(kind).problems[(presence, path, size)] == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("presence,path", [("online", "mailbox"), ("offline", "mailbox"), ("rebuild", "mailbox"),
                                           ("online", "history"), ("offline", "history")])
def test_each_conversation_in_conversation_seq_order(scenario, kind, presence, path):
    assert scenario(kind).order[(presence, path)] == []


@pytest.mark.parametrize("kind", KINDS)
def test_expired_cursor_rebuilt(scenario, kind):
    assert scenario(kind).problems[("rebuild", "rebuild", None)] == []


@pytest.mark.parametrize("kind", KINDS)
def test_over_limit_body_refused_locally_and_told_to_nobody(scenario, kind):
    sc = scenario(kind)
    exc = sc.over_limit
    assert getattr(exc, "code", None) == ErrorCode.PAYLOAD_TOO_LARGE, repr(exc)
    assert refused_locally(exc), f"refused by the server, not by the SDK: {exc!r}"
    assert not [t for d in sc.devices.values() for t in d.view.told if t.size == OVER_LIMIT]
