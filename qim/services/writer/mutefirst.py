"""A group mute wins over the send policy's refusal or hold (issue 38 item 6; decision
0127, Amendment).

The mute is checked by the reserving script (QIM_MUTED), after the send policy. When the
policy does not accept (a webhook's 403, or no answer under fail closed: a hold, decision
0133) the muted member would be told "moderation unavailable" and retry for as long as
the webhook is down, never learning of the mute. So on that path only, the group's meta
is read once (GroupStore.send_view, one round trip, O(1)) and a mute in force is what the
sender is told. An accepted send costs nothing more: the reserve refuses it as before.
"""

from __future__ import annotations

from typing import Optional

from qim.errors import ErrorCode, RequestError
from qim.policy import KeptRefusals, PolicySeam, SendFacts
from qim.services.writer.hlc import now_ms
from qim.stores.groups import GroupStore

__all__ = ["policy_check"]


async def policy_check(seam: PolicySeam, facts: SendFacts, kept: KeptRefusals,
                       groups: Optional[GroupStore]) -> Optional[bytes]:
    """`seam.check(facts, kept=kept)` (its replacement body or None), except that a group
    send or edit the policy refused (POLICY_REFUSED) or held (UNAVAILABLE) by a member
    muted in the group raises RequestError POLICY_REFUSED with the mute's message ("you
    are muted in this group until …: reason"). `groups` None: no mute check (direct
    conversations and rooms have no mute). The end is judged by the writer's clock, as
    for a reaction (decision 0127 item 2): the script judges it again at the commit."""
    try:
        return await seam.check(facts, kept=kept)
    except RequestError as exc:
        if groups is None or facts.kind != "group" or exc.code not in (ErrorCode.POLICY_REFUSED,
                                                                      ErrorCode.UNAVAILABLE):
            raise
        view = await groups.send_view(facts.tenant, facts.conversation_id, facts.user_id)
        told = view.muted(now_ms())
        if told is None:
            raise
        raise RequestError(ErrorCode.POLICY_REFUSED, told) from exc
