"""The error boundary of the stores: driver exceptions and script refusals
become typed store errors once, in one table (qim/stores/redis/errors.py), and an
unreachable backend is StoreUnavailable (UNAVAILABLE on the wire, retried by loops that
retry engine outages) from every store operation, never a driver exception."""

from __future__ import annotations

import pytest
from redis import exceptions as rx

from qim.config.tier import ScyllaConfig  # noqa: E402
from qim.errors import EngineError, ErrorCode, MailboxDirty, RequestError
from qim.stores.commits import CommitRef
from qim.stores.errors import CheckpointConflict, ClockBehind, Conflict, LeaseLost, StoreCorrupt, StoreUnavailable
from qim.stores.groups import SnapshotKey
from qim.stores.messages import NEWER, MessageRef, TailQuery
from qim.stores.redis.errors import translate
from qim.stores.sessions import Registration
from tests.stores.conftest import BACKENDS, direct

_NOWHERE = ScyllaConfig(("127.0.0.1",), 1, "qim_nowhere", allow_single_node_dev=True)
# backend -> engines nothing listens on
DEAD = {"redis": {"redis": "127.0.0.1:1"}, "redis3": {"redis3": ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")}, "cql": {"redis": "127.0.0.1:1", "cql": _NOWHERE},
        "seam": {"redis": "127.0.0.1:1", "cql": _NOWHERE}}


@pytest.mark.parametrize("exc", [
    rx.BusyLoadingError("Redis is loading the dataset in memory"), rx.ConnectionError("refused"),
    rx.TimeoutError("timed out"), rx.ReadOnlyError("READONLY replica"), rx.OutOfMemoryError("OOM command not allowed"),
    rx.NoScriptError("NOSCRIPT"), rx.ResponseError("ERR something else"), rx.RedisError("client side"),
])
def test_outages_are_store_unavailable(exc):
    err = translate(exc, "op")
    assert isinstance(err, StoreUnavailable) and isinstance(err, EngineError) and isinstance(err, RequestError)
    assert err.code == ErrorCode.UNAVAILABLE and err.message.startswith("op: redis ")


@pytest.mark.parametrize("text,cls,code,message", [
    ("QIM_CONFLICT client_message_id reused with other content script: abc, on @user_script:12.", Conflict,
     ErrorCode.CONFLICT, "client_message_id reused with other content"),
    ("QIM_HLC_LOST high-water moved by another writer", LeaseLost, ErrorCode.UNAVAILABLE,
     "high-water moved by another writer"),
    ("QIM_CKPT_BINDING checkpoint rebound under us", CheckpointConflict, ErrorCode.UNAVAILABLE,
     "checkpoint rebound under us"),
    ("QIM_SOMETHING_NEW what", StoreCorrupt, ErrorCode.INTERNAL, "op: unknown script refusal QIM_SOMETHING_NEW"),
    ("QIM_CLOCK_BEHIND zz", StoreCorrupt, ErrorCode.INTERNAL, "op: QIM_CLOCK_BEHIND without a message_id"),
])
def test_script_refusals_map_by_reason(text, cls, code, message):
    err = translate(rx.ResponseError(text), "op")
    assert type(err) is cls and err.code == code and err.message == message
    if cls not in (StoreCorrupt,):
        assert err.reason == text.split()[0]


def test_clock_behind_carries_the_newest_message_id_and_dirty_stops_a_shard():
    newest = bytes(range(16))
    err = translate(rx.ResponseError(f"QIM_CLOCK_BEHIND {newest.hex()} script: x"), "reserve")
    assert isinstance(err, ClockBehind) and err.message_id == newest
    dirty = translate(rx.ResponseError("QIM_DIGEST_CONFLICT dispatch_id seen with another payload"), "begin")
    assert isinstance(dirty, MailboxDirty) and dirty.code == ErrorCode.MAILBOX_DIRTY


def _operations(tenant: int, conv: bytes):
    ref = CommitRef(tenant, conv, 5, b"c" * 16)
    return {
        "messages.get": lambda s: s.messages.get(tenant, conv, b"m" * 16),
        "messages.history_page": lambda s: s.messages.history_page(tenant, conv, ((0, None),), 0, NEWER, 10, 1000),
        "messages.tails": lambda s: s.messages.tails(tenant, [TailQuery(conv, ((0, None),), 0)], 200),
        "messages.resolve": lambda s: s.messages.resolve(tenant, [MessageRef(conv, b"m" * 16)], []),
        "commits.load": lambda s: s.commits.load([ref]),
        "commits.mark_committed": lambda s: s.commits.mark_committed(ref, 1, 1),
        "commits.stale": lambda s: s.commits.stale(1, 1),
        "leases.renew": lambda s: s.leases.renew(1, 1, "t", 1000, 1),
        "groups.read": lambda s: s.groups.read(tenant, conv),
        "groups.snapshots": lambda s: s.groups.snapshots([SnapshotKey(tenant, conv, 1)]),
        "mailboxes.load_watermark": lambda s: s.mailboxes.load_watermark(1),
        "mailboxes.read_range": lambda s: s.mailboxes.read_range(tenant, 5, [1], -1, 10, 10),
        "sessions.register": lambda s: s.sessions.register([Registration(tenant, 5, conv, 1, 0, 0)]),
        "sessions.conversations": lambda s: s.sessions.conversations(tenant, 5),
        "reads.mark_read": lambda s: s.reads.mark_read(tenant, 5, conv, 1),
        "ping": lambda s: s.ping(),
        "check": lambda s: s.check(commit_facts=True, allow_unsafe_dev=True),
    }


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_every_operation_of_an_unreachable_backend_is_store_unavailable(backend):
    dead = BACKENDS[backend](DEAD[backend])
    conv = direct(dead).conversation_id
    try:
        for name, op in _operations(7, conv).items():
            with pytest.raises(StoreUnavailable) as caught:
                await op(dead)
            assert caught.value.code == ErrorCode.UNAVAILABLE, name
    finally:
        await dead.close()
