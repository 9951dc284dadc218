"""Transient server errors are ridden out, against a private real stack (docs/design.md §9;
issue 10 fault 7): connect() and pulls retry UNAVAILABLE with bounded backoff while
the mailbox service is down, and deliver everything once it is back."""

from __future__ import annotations

import asyncio

from qim.sdk import direct_conversation
from tests.sdk.realstack import eventually, runtime, shutdown, users


async def restart(st, name: str) -> None:
    await asyncio.to_thread(st.start_service, name)
    await asyncio.to_thread(st.wait_ready, [name])


async def test_connect_and_pull_survive_a_mailbox_outage(fresh_stack, tmp_path):
    st = fresh_stack
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra = runtime(st, tmp_path, a)
    await ra.connect()
    first = await ra.send_message(conv, b, b"sent before the outage")
    await asyncio.to_thread(st.stop_service, "mailbox")
    rb = runtime(st, tmp_path, b)
    connecting = asyncio.ensure_future(rb.connect())
    await asyncio.sleep(2.0)
    assert not connecting.done(), "connect() gave up on a transient UNAVAILABLE"
    await restart(st, "mailbox")
    await asyncio.wait_for(connecting, 60)
    st_b = rb.store

    async def has(mid: bytes) -> bool:
        return await st_b.run(st_b.has_message, mid)

    await eventually(lambda: has(first.message_id), timeout=30, what="first message delivered")
    await asyncio.to_thread(st.stop_service, "mailbox")
    second = await ra.send_message(conv, b, b"sent during the outage")  # committed; not materialized yet
    pulling = asyncio.ensure_future(rb.pull_mailbox())
    await asyncio.sleep(2.0)
    assert not pulling.done(), "a pull gave up on a transient UNAVAILABLE"
    await restart(st, "mailbox")
    await asyncio.wait_for(pulling, 60)
    await eventually(lambda: has(second.message_id), timeout=30, what="second message delivered")
    assert [m.body for m in await st_b.run(st_b.messages, conv)] == [b"sent before the outage",
                                                                     b"sent during the outage"]
    await shutdown(ra, rb)
