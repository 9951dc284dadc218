"""Two users chat: send, receive, the conversation list with unread, mark read, recall.

    python examples/direct_chat.py      (after: set -a; . .qim/stack/stack.env; set +a)
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from _common import check, endpoint, fresh_users, token

from qim.sdk import Client, MessagesAdded, MessagesUpdated


async def next_event(client: Client, kind):
    """The next event of one kind (an app would handle the others too)."""
    while True:
        event = await asyncio.wait_for(client.events.get(), 15)
        if isinstance(event, kind):
            return event


async def main(data_dir: str) -> None:
    alice_id, bob_id = fresh_users(2)
    alice = await Client.open(endpoint(), token(alice_id, 1), data_dir=data_dir)
    bob = await Client.open(endpoint(), token(bob_id, 1), data_dir=data_dir)
    await alice.connect()
    await bob.connect()

    chat = await alice.open_direct(bob_id)  # listed at once, even before the first message
    first = await alice.send_text(chat.conversation_id, "你好 Bob！")
    await alice.send_text(chat.conversation_id, "今晚吃火锅吗？🍲\n七点，老地方")
    got = []
    while len(got) < 2:
        got += (await next_event(bob, MessagesAdded)).messages
    for m in got:
        print(f"bob got #{m.conversation_seq} from {m.sender_id}: {m.body.decode()!r}")

    (entry,) = await bob.conversations()
    print(f"bob's list: user {entry.peer_user_id}, unread {entry.unread} (exact: {entry.unread_exact})")
    check(entry.unread == 2 and entry.unread_exact, "two unread messages")

    await bob.send_text(entry.conversation_id, "好啊 👍")  # sending marks the chat read up to it
    print(f"after bob's reply: unread {(await bob.conversation(entry.conversation_id)).unread}")

    await alice.recall(chat.conversation_id, first.message_id)
    recalled = (await next_event(bob, MessagesUpdated)).messages[0]
    print(f"bob sees #{recalled.conversation_seq} recalled: state={recalled.state} body={recalled.body!r}")
    check(recalled.state == 1 and recalled.body == b"", "the first message recalled")

    await alice.close()
    await bob.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(os.environ.get("QIM_DATA_DIR") or tmp))
