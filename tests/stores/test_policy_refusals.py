"""CommitStore contract of the send policy's kept refusals (docs/decisions/0099,
Amendment): `refuse` keeps a refusal beside the commit keys unless a commit exists (the
first reason stands, another content is Conflict), a reserve of a send the policy was
asked about (`policy_checked`) is refused in the same call (RefusalKept, nothing
consumed), `refusal` reads it, it expires with its TTL, and on several core instances it
lives on the instance of the conversation's commit bucket. Redis backends only: the
archive backends share the same Redis CommitStore."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.consts import COMMIT_OP_HELPER_TTL_MS
from qim.errors import ErrorCode
from qim.stores.commits import GroupSendCheck, RefusalKept
from qim.stores.errors import Conflict
from qim.stores.redis.keys import CommitKeys
from tests.stores.conftest import digest_of, direct, group

pytestmark = pytest.mark.parametrize("stores", ["redis", "redis3"], indirect=True)

TTL = COMMIT_OP_HELPER_TTL_MS


def checked(res):
    """The reservation as the writer makes it when a send policy is configured."""
    res.policy_checked = True
    return res


async def test_a_kept_refusal_answers_every_later_reserve_and_refuse_of_the_send(stores):
    c = direct(stores)
    cmid = b"r" * 16
    res = checked(c.reservation(5, cmid, b"spam"))
    assert await stores.commits.refusal(res.ref, res.digest) is None
    assert await stores.commits.refuse(res.ref, res.digest, "spam is not welcome", TTL) == "spam is not welcome"
    # the policy answers otherwise later (another reason, or accept): the first answer stands
    assert await stores.commits.refuse(res.ref, res.digest, "another reason", TTL) == "spam is not welcome"
    assert await stores.commits.refusal(res.ref, res.digest) == "spam is not welcome"
    with pytest.raises(RefusalKept) as refused:
        await stores.commits.reserve(checked(c.reservation(5, cmid, b"spam")))
    assert (refused.value.code, refused.value.message) == (ErrorCode.POLICY_REFUSED, "spam is not welcome")
    # the same cmid with other content: CONFLICT on each call, as at the commit
    other = checked(c.reservation(5, cmid, b"other body"))
    for call in (lambda: stores.commits.reserve(other), lambda: stores.commits.refusal(other.ref, other.digest),
                 lambda: stores.commits.refuse(other.ref, other.digest, "x", TTL)):
        with pytest.raises(Conflict):
            await call()
    assert not await stores.commits.exists(res.ref)
    after = await c.send(9, b"next")
    assert after.conversation_seq == 1  # nothing consumed by the refusals


async def test_a_group_send_reserve_reads_the_kept_refusal_too(stores):
    g = group(stores)
    await g.change(5, "create", [5, 9])
    res = checked(g.reservation(5, b"q" * 16, b"group spam"))
    assert await stores.commits.refuse(res.ref, res.digest, "not in this group", TTL) == "not in this group"
    with pytest.raises(RefusalKept) as refused:
        await stores.commits.reserve(checked(g.reservation(5, b"q" * 16, b"group spam")), GroupSendCheck(1, 5))
    assert refused.value.message == "not in this group"


async def test_a_commit_binds_the_acceptance_and_no_policy_reads_nothing(stores):
    c = direct(stores)
    accepted = await c.send(5, b"fine", cmid=b"a" * 16)
    ref, digest = c.reservation(5, b"a" * 16, b"fine").ref, digest_of(b"fine", b"a" * 16)
    assert await stores.commits.refuse(ref, digest, "changed its mind", TTL) is None  # the acceptance stands
    assert await stores.commits.refusal(ref, digest) is None  # and nothing was kept
    again = await stores.commits.reserve(checked(c.reservation(5, b"a" * 16, b"fine")))
    assert (again.fresh, again.conversation_seq) == (False, accepted.conversation_seq)
    # without a send policy (policy_checked False) the reserve does not read the refusal
    res = c.reservation(5, b"n" * 16, b"kept")
    assert await stores.commits.refuse(res.ref, res.digest, "refused", TTL) == "refused"
    fresh = await stores.commits.reserve(c.reservation(5, b"n" * 16, b"kept"))
    assert fresh.fresh and fresh.conversation_seq == accepted.conversation_seq + 1


async def test_a_kept_refusal_expires_and_lives_in_the_bucket_of_its_conversation(stores):
    c = direct(stores)
    res = c.reservation(5, b"t" * 16, b"spam")
    assert await stores.commits.refuse(res.ref, res.digest, "brief", 300) == "brief"
    keys = CommitKeys(c.tenant, c.conversation_id)
    topology = stores.topology
    key = keys.refusal(5, b"t" * 16)
    assert keys.tag in key
    holders = [addr for addr, client in topology.clients.items() if await client.exists(key)]
    assert len(holders) == 1 and topology.clients[holders[0]] is topology.core(keys.bucket)
    deadline = time.monotonic() + 30
    while await stores.commits.refusal(res.ref, res.digest) is not None:
        assert time.monotonic() < deadline, "the kept refusal never expired"
        await asyncio.sleep(0.1)
    fresh = await stores.commits.reserve(checked(c.reservation(5, b"t" * 16, b"spam")))
    assert fresh.fresh and fresh.conversation_seq == 1
