"""Helpers of the reaction and typing tests: clients on either gateway, what each app was
told, and what the server keeps for a user (mailbox entries, session list)."""

from __future__ import annotations

from qim.sdk import Client
from qim.sdk.reactions import ReactionsChanged, TypingChanged
from tests.e2e.sdkclient import client, server_list


async def on_gateway(st, tmp_path, user: int, device: int, **kw) -> Client:
    """A connected Client of (user, device): device 1 on the first gateway, 2 on the second."""
    c = await client(st, tmp_path, user, device, endpoint=st.gateway_addrs[(device - 1) % 2], **kw)
    await c.connect()
    return c


def reactions_told(c: Client, message_id: bytes) -> list[ReactionsChanged]:
    """The ReactionsChanged events of `message_id` the app of `c` was told, in order."""
    return [e for e in c.told.of(ReactionsChanged) if e.message_id == message_id]


def typing_told(c: Client, conversation_id: bytes) -> list[tuple[int, bool]]:
    """(user, typing) of every TypingChanged of the conversation `c`'s app was told."""
    return [(e.user_id, e.typing) for e in c.told.of(TypingChanged) if e.conversation_id == conversation_id]


async def listed(c: Client) -> tuple[list[bytes], dict[bytes, tuple[int, int]]]:
    """The server's session list of `c`'s user: the order of its conversations (by
    last_activity_id, newest first: what moves a conversation up) and each one's
    (unread, last conversation_seq)."""
    entries = await server_list(c)
    order = sorted(entries, key=lambda k: (bytes(entries[k].last_activity_id), k), reverse=True)
    return order, {k: (e.unread, e.last_message.conversation_seq) for k, e in entries.items()}


async def local_view(c: Client) -> dict[bytes, tuple[int, int]]:
    """The SDK's conversation list: conversation -> (unread, last conversation_seq)."""
    return {conv.conversation_id: (conv.unread, conv.last_conversation_seq) for conv in await c.conversations()}
