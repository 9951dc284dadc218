"""The order of a rolling restart or upgrade (docs/operations.md "Rolling upgrade"):
every node of every kind, one at a time, each back and healthy before the next.

Kinds go readers first: a node that reads a record or a frame is restarted (upgraded)
before the nodes that write it, so a new form is written only once every reader of it
runs the release that understands it:

- PushBatch (mailbox -> gateway), DEVICE_FRAMES (session -> gateway): gateways first;
- PROJECTION (mailbox -> session): session before mailbox;
- dispatch records (fanout -> mailbox, session): mailbox and session before fanout;
- Outbox records (writer -> fanout, archiver): fanout and archiver before writer;
- ROOM_PUSH (room -> gateway): gateways before RoomWriters (rooms touch no record of
  the others, so they go just before the writers).

Requests the gateway sends to writers, mailboxes and sessions go the other way, so they
never change in one step: a release adds what backends accept, and a later one makes
gateways use it (docs/operations.md).
"""

from __future__ import annotations

from qim.dev.stack_layout import kind_of
from qim.topology import roll_order

ROLL_ORDER = roll_order()  # the service table's `roll` column (qim/topology.py)


def rolling_order(names: list[str]) -> list[str]:
    """The stack's instance names ("writer", "writer2", ...) in rolling order: by kind as
    ROLL_ORDER says, nodes of one kind in their own order. EngineError for a name that is
    not an instance of a service (stack_layout.kind_of)."""
    rank = {kind: i for i, kind in enumerate(ROLL_ORDER)}
    return sorted(names, key=lambda n: (rank.get(kind_of(n).name, len(rank)), names.index(n)))
