"""Stores: every store of one process over one backend, and the backend's own checks
(docs/decisions/0019-storage-layer.md). A backend subclasses it and fills every field
(qim/stores/redis/backend.py); the tiered set (qim/stores/open.py) takes another set's
stores field by field, so a new store is one field here and one line in its backend."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from qim.stores.commits import CommitStore
from qim.stores.convstate import ConversationStateStore
from qim.stores.groups import GroupStore
from qim.stores.leases import ClockLeaseStore
from qim.stores.mailboxes import MailboxStore
from qim.stores.messages import MessageStore
from qim.stores.presence import SessionEpochStore
from qim.stores.push import PushRegistrationStore
from qim.stores.reads import ReadPositionStore
from qim.stores.rooms import RoomEpochStore
from qim.stores.sessions import SessionStore

if TYPE_CHECKING:
    from qim.stores.tier import ArchiveTier


@dataclass(eq=False)
class Stores:
    """The stores of one process (each annotated with its Protocol: mypy checks every
    implementation) and `archive_tier` (None without QIM_SCYLLA_ADDRS). Subclasses set
    `name` and implement check, ping and close."""

    messages: MessageStore
    commits: CommitStore
    leases: ClockLeaseStore
    groups: GroupStore
    mailboxes: MailboxStore
    sessions: SessionStore
    reads: ReadPositionStore
    epochs: SessionEpochStore
    rooms: RoomEpochStore
    convstates: ConversationStateStore
    push: PushRegistrationStore  # device push registrations (docs/decisions/0128)
    archive_tier: Optional["ArchiveTier"] = None
    name: ClassVar[str] = ""

    def stores_of(self) -> dict[str, Any]:
        """Every field by name: what another set over the same backend starts from."""
        return {f.name: getattr(self, f.name) for f in fields(Stores)}

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """Refuse an unsafe deployment at start (EngineError naming every problem;
        `commit_facts`: the instance holds commit state, so stricter persistence)."""
        raise NotImplementedError

    async def ping(self) -> None:
        """Return when the backend answers; StoreUnavailable otherwise (readiness)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections."""
        raise NotImplementedError
