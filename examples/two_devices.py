"""One user on two devices: the read position is the user's (READ_SYNC moves it on
the other device), own messages are never unread, and a device id kept with the store.

    python examples/two_devices.py      (after: set -a; . .qim/stack/stack.env; set +a)
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from _common import check, endpoint, fresh_users, token

from qim.sdk import Client, ReadPositionChanged, device_identity


async def wait_for(client: Client, kind, test=lambda e: True):
    while True:
        event = await asyncio.wait_for(client.events.get(), 15)
        if isinstance(event, kind) and test(event):
            return event


async def main(data_dir: str) -> None:
    me, friend_id = fresh_users(2)
    # an app without a device id asks its store for one (created once, then kept)
    phone = await device_identity(endpoint(), 0, me, os.path.join(data_dir, "phone"))
    again = await device_identity(endpoint(), 0, me, os.path.join(data_dir, "phone"))
    check(phone == again, "the device id is kept with the store")
    print(f"phone is device {phone.device_id}, store {os.path.basename(phone.store_path)}")

    phone_client = await Client.open(endpoint(), token(me, phone.device_id), data_dir=os.path.join(data_dir, "phone"))
    laptop = await Client.open(endpoint(), token(me, 2), data_dir=os.path.join(data_dir, "laptop"))
    friend = await Client.open(endpoint(), token(friend_id, 1), data_dir=os.path.join(data_dir, "friend"))
    for c in (phone_client, laptop, friend):
        await c.connect()

    chat = await friend.open_direct(me)
    for text in ("早上好", "在吗？", "🙂"):
        await friend.send_text(chat.conversation_id, text)
    for device in (phone_client, laptop):
        while (await device.conversation(chat.conversation_id) or chat).unread < 3:
            await asyncio.sleep(0.05)
    print("unread on both devices: 3")

    seq = await phone_client.mark_read(chat.conversation_id)
    synced = await wait_for(laptop, ReadPositionChanged, lambda e: e.read_conversation_seq == seq)
    print(f"laptop told by {synced.source}: read up to #{synced.read_conversation_seq}")
    entry = await laptop.conversation(chat.conversation_id)
    check(entry.unread == 0, "read on the phone is read on the laptop")
    print(f"laptop unread now: {entry.unread}")

    await laptop.send_text(chat.conversation_id, "我在")  # own messages are never unread
    while (await friend.conversation(chat.conversation_id)).unread < 1:
        await asyncio.sleep(0.05)
    check((await laptop.conversation(chat.conversation_id)).unread == 0, "own message not unread")
    print(f"friend unread: {(await friend.conversation(chat.conversation_id)).unread}, laptop unread: 0")
    for c in (phone_client, laptop, friend):
        await c.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(os.environ.get("QIM_DATA_DIR") or tmp))
