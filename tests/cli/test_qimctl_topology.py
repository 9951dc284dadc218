"""qimctl and the replay's history check on several standalone Redis instances
(docs/decisions/0096, 0101): with QIM_REDIS_CORE_ADDRS / QIM_REDIS_MAILBOX_ADDRS set, each
command reads and writes a key on the instance the placement rules say, `audit dispatch`
waits on every core instance, `trace` checks every mailbox instance, and `backup` /
`restore` refuse several instances with a message naming them, writing nothing. Three
real instances, each looked at with its own client."""

from __future__ import annotations

import asyncio

import pytest

from qim.cli import qimctl
from qim.cli.replay_common import TENANT as REPLAY_TENANT
from qim.cli.replay_history import _floors
from qim.config.redislayout import RedisLayout
from qim.stores.redis.keys import CommitKeys, archive_watermark_key
from tests.cli.conftest import one_line

TENANT = 5


@pytest.fixture
def three(redis_three):
    """Three private Redis instances (tests/fixtures.py), stopped after the test."""
    return redis_three


@pytest.fixture
def layout_env(three, monkeypatch) -> RedisLayout:
    """The environment of a deployment on the three: core (a, b, c), mailbox (c, a, b)."""
    a, b, c = (e.addr for e in three)
    for name, value in (("QIM_REDIS_ADDR", a), ("QIM_REDIS_CORE_ADDRS", f"{a},{b},{c}"),
                        ("QIM_REDIS_MAILBOX_ADDRS", f"{c},{a},{b}"), ("QIM_MAILBOX_SHARD_COUNT", "8"),
                        ("QIM_TENANT_ID", str(TENANT))):
        monkeypatch.setenv(name, value)
    for name in ("QIM_SCYLLA_ADDRS", "QIM_KAFKA_BOOTSTRAP"):
        monkeypatch.delenv(name, raising=False)
    return RedisLayout((a, b, c), (c, a, b), 8)


def conv_on(layout: RedisLayout, index: int, tenant: int = TENANT) -> bytes:
    """A conversation_id of `tenant` whose commit bucket is on core instance `index`."""
    n = 1
    while layout.core_index(CommitKeys(tenant, n.to_bytes(16, "big")).bucket) != index:
        n += 1
    return n.to_bytes(16, "big")


def test_retention_set_writes_on_the_conversations_core_instance(three, layout_env, capsys):
    conv = conv_on(layout_env, 1)
    key = CommitKeys(TENANT, conv).retention()
    assert qimctl.main(["retention", "set", "--conversation", conv.hex(), "--class", "compliance_hold"]) == 0
    assert [e.client().get(key) for e in three] == [None, b"compliance_hold", None]
    capsys.readouterr()
    assert qimctl.main(["retention", "get", "--conversation", conv.hex()]) == 0
    assert capsys.readouterr().out == f"retention: conversation={conv.hex()} class=compliance_hold\n"


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_backup_and_restore_of_several_instances_are_refused(three, layout_env, tmp_path, capsys, command):
    target = tmp_path / "backup"
    flag = "--to" if command == "backup" else "--from"
    assert qimctl.main([command, flag, str(target), "--kafka-bootstrap", "127.0.0.1:1"]) == 2
    err = one_line(capsys, "qimctl: error: ")
    assert f"{command} of several Redis instances" in err and "not supported" in err
    assert all(e.addr in err for e in three)
    assert not target.exists()  # nothing written
    assert all(e.client().dbsize() == 0 for e in three)


def test_audit_dispatch_waits_on_every_core_instance(three, layout_env, capsys):
    args = qimctl.build_parser().parse_args(["audit", "dispatch", "--kafka-bootstrap", "127.0.0.1:1"])
    qimctl._validate(args)
    assert args.redis_addr == layout_env.core
    # an address that is not the deployment's home is another deployment: refused, named
    assert qimctl.main(["audit", "dispatch", "--kafka-bootstrap", "127.0.0.1:1", "--redis-addr",
                        three[1].addr]) == 2
    assert "is not the first of QIM_REDIS_CORE_ADDRS" in one_line(capsys, "qimctl: error: --redis-addr")


def test_trace_checks_every_mailbox_instance_before_kafka(three, layout_env, monkeypatch, capsys, dead):
    a = three[0].addr
    monkeypatch.setenv("QIM_REDIS_MAILBOX_ADDRS", f"{a},{dead}")  # MailboxShard 1 on a dead instance
    assert qimctl.main(["trace", "0123456789ab00010001000100000000", "--kafka-bootstrap", dead]) == 2
    assert one_line(capsys, "qimctl: error: ").startswith(f"qimctl: error: redis at {dead}:")


def test_replay_history_reads_each_floor_on_its_instance(three, layout_env):
    convs = [conv_on(layout_env, i, REPLAY_TENANT) for i in range(3)]
    three[0].client().set(archive_watermark_key(), 2_000)
    for i, conv in enumerate(convs):
        three[i].client().set(CommitKeys(REPLAY_TENANT, conv).floor(), 10 + i)
    floors = asyncio.run(_floors(three[0].addr, convs, 1_000, 0.0))
    assert floors == {convs[0]: 10, convs[1]: 11, convs[2]: 12}


def test_token_revoke_writes_every_core_instance(three, layout_env):
    """Decision 0100: the reserve reads the cutoff on its conversation's core instance, so
    `qimctl token revoke` writes it on each of them."""
    from qim.stores.redis.keys import revocation_key

    assert qimctl.main(["token", "revoke", "--user", "9", "--device", "2"]) == 0
    key = revocation_key(TENANT, 9, 2)
    assert [bool(e.client().exists(key)) for e in three] == [True, True, True]
