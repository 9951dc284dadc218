"""PULL_HISTORY in the writer (docs/decisions/0005-groups-history.md; docs/design.md §5 step 7,
§7, §11 history page 512 KiB).

Pages the conversation's history in either direction from an anchor, clipped to the
actor's visible intervals (a re-joined member pages across the gap between its
memberships, seeing neither the gap nor anything outside), bounded by a limit and a byte
budget (the first item is always returned): ONE MessageStore.history_page call, the
seam where hot (Redis) and cold (CQL) history will be joined (docs/decisions/0019). A
missing or corrupt record fails the page (INTERNAL), never a silent gap. Gaps in
conversation_seq are legal and cost nothing (docs/decisions/0005-groups-history.md).
"""

from __future__ import annotations

from qim.consts import HISTORY_PAGE_DEFAULT_LIMIT, HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_LIMIT
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import history_pb2, internal_pb2
from qim.services.writer.access import visible_interval
from qim.stores import quotes
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore
from qim.wire.history import history_item


async def pull_history(messages: MessageStore, groups: GroupStore, actor: internal_pb2.Actor,
                       req: history_pb2.PullHistory) -> history_pb2.HistoryBatch:
    """One HISTORY_BATCH page. Raises RequestError (FORBIDDEN, INVALID_ARGUMENT, INTERNAL)."""
    tenant = int.from_bytes(actor.tenant_id, "big")
    vis = await visible_interval(groups, tenant, actor.user_id, req.conversation_id, req.peer_user_id)
    if req.direction not in (history_pb2.NEWER, history_pb2.OLDER):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "unknown history direction")
    limit = min(req.limit or HISTORY_PAGE_DEFAULT_LIMIT, HISTORY_PAGE_MAX_LIMIT)
    max_bytes = min(req.max_bytes or HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_BYTES)
    page = await messages.history_page(tenant, req.conversation_id, vis.intervals, req.anchor_seq, req.direction,
                                       limit, max_bytes)
    batch = history_pb2.HistoryBatch(has_more=page.has_more, next_anchor=req.anchor_seq)
    for rec in page.records:
        batch.items.append(history_item(rec, actor.user_id))
        batch.next_anchor = rec.conversation_seq
    # a quote of a message recalled or removed since is read without its text (decision 0134)
    await quotes.refresh(messages, tenant, [(req.conversation_id, item) for item in batch.items])
    return batch
