"""SessionProjection's first registrations in CQL (docs/decisions/0023; seed 000 ADR-0021 decision 4:
"UserConversationState 首次进入集合时登记（投影 Lua 写 Redis 待登记队列、后台批量落表）";
seed 004 §6).

The registration script (qim/stores/redis/lua/session_register.lua, shared by both
projection paths) queues a (user, conversation) the first time it enters the user's
conversation set; `FirstRegistrations` writes the queue to user_conversation_state in
batches and only then drops what it wrote (a crash writes a batch again: idempotent).
`restore_list` completes a user's conversation set from that table when Redis lost it
(the set not marked checked, docs/decisions/0065): each missing conversation is
registered again at the created_at of its newest visible message, through the same
registration script.

Limit (seed 000): a conversation first registered while the queue was lost (Redis
restored from an older AOF) and without any message since is not in the table.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from qim.consts import CONVERSATION_KIND_GROUP
from qim.errors import EngineError
from qim.services.session.metrics import SessionMetrics
from qim.stores.archive import ConversationStateStore
from qim.stores.errors import StorageError
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN
from qim.stores.messages import MessageStore, TailQuery
from qim.stores.sessions import Registration, SessionStore

logger = logging.getLogger(__name__)

DRAIN_BATCH = 512
DRAIN_IDLE_S = 1.0


class FirstRegistrations:
    """`run()` drains the first-registration queue into CQL for the node's lifetime."""

    def __init__(self, sessions: SessionStore, conversations: ConversationStateStore,
                 metrics: Optional[SessionMetrics] = None) -> None:
        self._sessions = sessions
        self._conversations = conversations
        self._m = metrics if metrics is not None else SessionMetrics()

    async def drain_once(self) -> int:
        """Write one batch of the queue to CQL, then drop it from the queue; how many."""
        rows = await self._sessions.pending_first(DRAIN_BATCH)
        if rows:
            await self._conversations.register(rows)
            await self._sessions.done_first(rows)
            self._m.first_registrations.inc(len(rows))
        return len(rows)

    async def run(self) -> None:
        """Drain forever; an outage of Redis or CQL is counted, logged once and retried."""
        failing = False
        while True:
            try:
                n = await self.drain_once()
                failing = False
            except (StorageError, EngineError) as exc:
                self._m.first_registration_failures.inc()
                if not failing:
                    logger.warning("first registrations not written to CQL (%s); retrying", exc)
                failing, n = True, 0
            if n < DRAIN_BATCH:
                await asyncio.sleep(DRAIN_IDLE_S)


async def restore_list(tenant: int, user: int, known: frozenset, sessions: SessionStore,
                       conversations: ConversationStateStore, messages: MessageStore, groups: GroupStore,
                       metrics: Optional[SessionMetrics] = None) -> int:
    """Register again every conversation user_conversation_state holds for the user that
    its set lacks (`known`: the set's members, hex), then mark the set checked; how many
    were registered. Conversations without a visible message, and groups the user never
    belonged to, are left out.

    Called when the set is not marked checked (docs/decisions/0065), whether or not it is
    empty: after Redis lost it, a replayed or new message registers one conversation
    before the user's first page, and an emptiness test then skipped the rest for good.
    An intact set costs one CQL partition read per user, once. StorageError / EngineError
    propagate and leave the mark unset (the next cold page tries again)."""
    rows = [r for r in await conversations.conversations(tenant, user) if r.conversation_id.hex().encode() not in known]
    queries = []
    for row in rows:
        intervals = OPEN
        if row.kind == CONVERSATION_KIND_GROUP:
            found = await groups.intervals_of(tenant, row.conversation_id, user)
            if found is None:
                continue
            intervals = found
        queries.append((row, TailQuery(row.conversation_id, intervals, 0)))
    tails = await messages.tails(tenant, [q for _, q in queries], 0) if queries else []
    regs = [Registration(tenant, user, row.conversation_id, tail.head.created_at_ms, 0, row.peer)
            for (row, _), tail in zip(queries, tails) if tail.head is not None]
    await sessions.register(regs)
    await sessions.mark_checked(tenant, user, len(known) + len(regs))
    if regs:
        (metrics or SessionMetrics()).lists_restored.inc()
        logger.info("conversation list of a user completed from user_conversation_state (%d conversations)",
                    len(regs))
    return len(regs)
