"""qimctl of the archive tier: `schema apply|check` on a keyspace of the shared
Cassandra node (idempotent; a missing keyspace and an unreachable node are exit 2 with a
message naming the fix), `retention set|get` on a private Redis."""

from __future__ import annotations

import secrets

import pytest

from qim.cli import qimctl
from tests.e2e.archive import drop_keyspace


@pytest.fixture
def keyspace(shared_cassandra, monkeypatch):
    name = f"qim_cli_{secrets.token_hex(4)}"
    monkeypatch.setenv("QIM_SCYLLA_ADDRS", shared_cassandra.addr)
    monkeypatch.setenv("QIM_SCYLLA_KEYSPACE", name)
    monkeypatch.setenv("QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV", "1")
    yield name
    drop_keyspace(shared_cassandra, name)


def test_schema_apply_is_idempotent_and_check_names_the_fix(keyspace, capsys, monkeypatch):
    assert qimctl.main(["schema", "check"]) == 2
    assert f"keyspace {keyspace} does not exist: run `qimctl schema apply`" in capsys.readouterr().err
    assert qimctl.main(["schema", "apply"]) == 0
    assert capsys.readouterr().out.strip() == f"schema: keyspace={keyspace} version=2 applied=[1, 2]"
    assert qimctl.main(["schema", "apply"]) == 0
    assert capsys.readouterr().out.strip() == f"schema: keyspace={keyspace} version=2 applied=[]"
    assert qimctl.main(["schema", "check"]) == 0
    monkeypatch.setenv("QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV", "0")  # a production process refuses RF 1
    assert qimctl.main(["schema", "check"]) == 2
    assert "fewer than 3 replicas" in capsys.readouterr().err


def test_a_migration_cut_short_after_its_alter_is_applied_again(keyspace, shared_cassandra, capsys):
    """Migration 2 (decision 0120) adds columns with ALTER TABLE, which fails on a column
    that exists: a run that added them but died before recording the version must not
    wedge every later `schema apply`."""
    import asyncio

    from qim.stores.cql.session import CqlSession

    assert qimctl.main(["schema", "apply"]) == 0
    capsys.readouterr()

    async def forget_version_2() -> None:
        s = CqlSession(shared_cassandra.scylla(keyspace))
        try:
            await s.execute(f"DELETE FROM {keyspace}.schema_version WHERE component = 'qim' AND version = 2")
        finally:
            await s.close()

    asyncio.run(forget_version_2())
    assert qimctl.main(["schema", "apply"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == f"schema: keyspace={keyspace} version=2 applied=[2]"


def test_schema_of_an_unreachable_node_and_a_missing_address(monkeypatch, capsys):
    monkeypatch.setenv("QIM_SCYLLA_ADDRS", "127.0.0.1:1")
    assert qimctl.main(["schema", "check"]) == 2
    assert "NoHostAvailable" in capsys.readouterr().err
    monkeypatch.delenv("QIM_SCYLLA_ADDRS")
    assert qimctl.main(["schema", "apply"]) == 2
    assert "QIM_SCYLLA_ADDRS (or --scylla-addrs) is required" in capsys.readouterr().err


def test_retention_set_and_get(private_redis, capsys):
    conv = "01" + "ab" * 15
    base = ["--conversation", conv, "--redis-addr", private_redis.addr]
    assert qimctl.main(["retention", "get", *base]) == 0
    assert capsys.readouterr().out.strip() == f"retention: conversation={conv} class=default"
    assert qimctl.main(["retention", "set", "--class", "compliance_hold", *base]) == 0
    assert capsys.readouterr().out.strip().endswith("class=compliance_hold")
    assert qimctl.main(["retention", "set", "--class", "default", *base]) == 0
    assert capsys.readouterr().out.strip().endswith("class=default")
    assert qimctl.main(["retention", "get", "--conversation", "00" * 16, "--redis-addr", private_redis.addr]) == 2
    assert "--conversation must be 32 hex digits" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        qimctl.main(["retention", "set", "--class", "forever", *base])
