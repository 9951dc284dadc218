"""A store put back from an older copy, and a store copied to a second machine, against
the real stack (issue 34 item 1; docs/decisions/0081). The SQLite file is copied as a
backup would copy it. A restored store must never reissue a client_message_id the
server remembers (it got CONFLICT, or the first message's ACK for a new message);
a copy on another machine must become a new device, or be refused for the old one."""

from __future__ import annotations

import os
import shutil

import pytest

from qim.sdk import Client, StoreError
from qim.sdk.identity import device_identity
from qim.sdk.schema import MACHINE_ID_ENV
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport
from tests.e2e.sdkclient import client
from tests.sdk.realstack import eventually, users


async def open_at(stack, data_dir, user: int, device: int) -> Client:
    token = issue_dev_token(stack.token_key, 0, user, device)
    return await Client.open(stack.gateway_addr, token, data_dir=str(data_dir), send_timeout=30,
                             event_queue=False, **sdk_transport(stack))


def put_back(backup: str, path: str) -> None:
    """Replace the store file with the older copy (a closed store has no -wal/-shm)."""
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    shutil.copyfile(backup, path)


async def bodies_at(peer: Client, conv: bytes, n: int) -> list[bytes]:
    async def enough() -> bool:
        return len(await peer.messages(conv)) >= n

    await eventually(enough, timeout=30, what=f"{n} messages at the peer")
    return [m.body for m in await peer.messages(conv)]


async def test_a_store_put_back_from_an_older_copy_never_reissues_a_cmid(stack, tmp_path, monkeypatch):
    monkeypatch.setenv(MACHINE_ID_ENV, "machine-a")
    a, b = users(2)
    data = tmp_path / "a"
    ident = await device_identity(stack.gateway_addr, 0, a, str(data))
    c = await open_at(stack, data, a, ident.device_id)
    await c.connect()
    await c.close()
    backup = str(tmp_path / "backup.sqlite3")
    shutil.copyfile(ident.store_path, backup)  # the phone's backup

    c = await open_at(stack, data, a, ident.device_id)
    await c.connect()
    conv = (await c.open_direct(b)).conversation_id
    before = [await c.send_text(conv, t) for t in ("first", "ok")]
    await c.close()

    put_back(backup, ident.store_path)  # restored from the backup
    c = await open_at(stack, data, a, ident.device_id)
    await c.connect()
    await c.open_direct(b)
    after = [await c.send_text(conv, t) for t in ("second", "ok")]  # was CONFLICT; "ok" got the first ACK
    assert not {x.message_id for x in after} & {x.message_id for x in before}
    await c.close()

    put_back(backup, ident.store_path)  # again, and this time sends stored before connect()
    c = await open_at(stack, data, a, ident.device_id)
    await c.open_direct(b)
    queued = [await c.send_text(conv, t, wait=False) for t in ("first", "ok", "third")]
    await c.connect()

    async def all_acked() -> bool:
        return not await c.unsent(conv)

    await eventually(all_acked, timeout=30, what="the queued sends acknowledged")
    assert len(set(queued)) == 3
    peer = await client(stack, tmp_path, b)
    await peer.connect()
    got = await bodies_at(peer, conv, 7)
    assert got == [b"first", b"ok", b"second", b"ok", b"first", b"ok", b"third"]
    await c.close()
    await peer.close()


async def test_a_store_copied_to_a_second_machine_becomes_a_new_device(stack, tmp_path, monkeypatch):
    monkeypatch.setenv(MACHINE_ID_ENV, "machine-a")
    a, b = users(2)
    ident = await device_identity(stack.gateway_addr, 0, a, str(tmp_path / "a"))
    first = await open_at(stack, tmp_path / "a", a, ident.device_id)
    await first.connect()
    conv = (await first.open_direct(b)).conversation_id
    await first.send_text(conv, "from machine a")
    await first.close()
    copy_dir = tmp_path / "b"
    copy_path = ident.store_path.replace(str(tmp_path / "a"), str(copy_dir))
    os.makedirs(os.path.dirname(copy_path))
    shutil.copyfile(ident.store_path, copy_path)  # the whole data directory copied to machine b

    monkeypatch.setenv(MACHINE_ID_ENV, "machine-b")
    with pytest.raises(StoreError, match="copied from another machine"):
        await open_at(stack, copy_dir, a, ident.device_id)  # told it cannot be that device
    other = await device_identity(stack.gateway_addr, 0, a, str(copy_dir))
    assert other.device_id != ident.device_id and other.store_path == copy_path
    second = await open_at(stack, copy_dir, a, other.device_id)
    await second.connect()  # a new device: REBUILDs the copied rows from history
    assert [m.body for m in await second.messages(conv)] == [b"from machine a"]
    monkeypatch.setenv(MACHINE_ID_ENV, "machine-a")
    first = await open_at(stack, tmp_path / "a", a, ident.device_id)  # machine a keeps its device
    await first.connect()
    await second.send_text(conv, "from machine b")
    await first.send_text(conv, "again from a")
    assert first.state == second.state == "ready"  # neither kicked the other (REPLACED)
    peer = await client(stack, tmp_path, b)
    await peer.connect()
    assert await bodies_at(peer, conv, 3) == [b"from machine a", b"from machine b", b"again from a"]
    for c in (first, second, peer):
        await c.close()
