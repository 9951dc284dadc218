"""A group: create, members, a custom message type, scrolling back through history,
leave.

    python examples/group_chat.py       (after: set -a; . .qim/stack/stack.env; set +a)
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile

from _common import check, endpoint, fresh_users, token

from qim.sdk import Client


async def main(data_dir: str) -> None:
    owner_id, *others = fresh_users(3)
    owner = await Client.open(endpoint(), token(owner_id, 1), data_dir=data_dir)
    member = await Client.open(endpoint(), token(others[0], 1), data_dir=data_dir)
    await owner.connect()
    await member.connect()

    group = await owner.create_group(others)
    print(f"group {group.group_id} created")
    members = await owner.members(group.group_id)
    print("members:", ", ".join(f"{m.user_id}{' (owner)' if m.owner else ''}" for m in members))
    check(len(members) == 3, "three members")

    card = json.dumps({"title": "周末爬山", "when": "Sat 08:00"}, ensure_ascii=False).encode()
    await owner.send_custom(group.conversation_id, "demo.event-card", card)
    for i in range(12):
        await owner.send_text(group.conversation_id, f"message {i}")

    while (await member.conversation(group.conversation_id) or group).unread < 13:
        await asyncio.sleep(0.05)
    page = await member.messages(group.conversation_id, limit=5)  # the newest five
    print("newest:", [m.body.decode() for m in page])
    older = await member.messages(group.conversation_id, before_seq=page[0].conversation_seq, limit=50)
    first = older[0]
    print(f"oldest: {first.custom_type.decode()} {json.loads(first.body)}")
    check(first.custom_type == b"demo.event-card", "the custom message comes back whole")

    left = await member.leave_group(group.group_id)
    print(f"member left at #{left.left_at}; still listed: {left.conversation_id == group.conversation_id}")
    await owner.close()
    await member.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(os.environ.get("QIM_DATA_DIR") or tmp))
