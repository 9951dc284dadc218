"""Group dialogues of the replay ("make demo also replays some dialogues as
small groups").

The two speakers of a dialogue and a silent listener form a fresh group (CREATE_GROUP by
the first speaker). Turns alternate between the speakers, each sent after the previous
ACK; the listener stays offline until the end and gets everything by the login pull.
Every other group dialogue gives the listener a second device that marks the group read;
in every third one the first speaker recalls its first message.
The checks are the replay's (qim/cli/replay_dialogue.py): a message counts as delivered
when every other member's app was told it byte-exact with the right sender and
conversation_seq; CONTROL messages (the group's CREATED event) are not dialogue turns:
they count only in the per-conversation order check.
"""

from __future__ import annotations

from qim._core import ids
from qim.cli.replay_common import TENANT
from qim.cli.replay_dialogue import DialogueBase, Item
from qim.sdk import SendAck
from qim.sdk.requests import create_group

GROUP_EVERY = 5  # every 5th dialogue is replayed as a group


class GroupDialogue(DialogueBase):
    """One dialogue in a 3-member group (speakers a, b and listener); `run()` returns its Tally."""

    mode = "group"

    def __init__(self, index: int, items: list[Item], users: tuple[int, int, int], group_id: int, cfg,
                 base_dir: str) -> None:
        nth = index // max(1, cfg.group_every)
        super().__init__(index, items, cfg, base_dir, users[2] if nth % 2 == 0 else None,
                         cfg.recall and nth % 3 == 1)
        self.members = users
        self.group_id = group_id
        self.conv = ids.conversation_id_group(TENANT, group_id)

    def sender_of(self, i: int) -> int:
        """Who sends line `i` (the two talkers alternate; the third member only listens)."""
        return self.members[i % 2]

    async def setup(self) -> None:
        """Connect the two talkers and create the group (the listener joins as a member)."""
        a, b, listener = self.members
        await self.devices[a].rt.connect()
        await self.devices[b].rt.connect()
        await create_group(self.devices[a].rt, self.group_id, [b, listener])

    async def send_item(self, sender: int, item: Item, over_limit: bool) -> SendAck:
        """Send one corpus line to the group from `sender`."""
        return await self.devices[sender].rt.send_message(self.conv, 0, item.body, item.message_type,
                                                          item.custom_type)
