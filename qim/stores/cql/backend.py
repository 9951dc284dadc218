"""The CQL backend of a process (docs/decisions/0023): one CqlSession and every CQL store over it,
the schema check at start and liveness. Built by qim.stores.open.open_archive."""

from __future__ import annotations

from qim.config.tier import ScyllaConfig
from qim.stores.archive import ArchiveStore, ConversationStateStore
from qim.stores.cql import schema
from qim.stores.cql.archive import CqlArchive, CqlConversationState
from qim.stores.cql.messages import CqlMessageStore
from qim.stores.cql.session import CqlSession
from qim.stores.messages import MessageStore


class CqlBackend:
    """`messages` (MessageStore over the archive), `archive` (ArchiveStore),
    `conversations` (ConversationStateStore)."""

    name = "cql"

    def __init__(self, cfg: ScyllaConfig) -> None:
        self.session = CqlSession(cfg)
        self.cql_messages = CqlMessageStore(self.session)
        self.messages: MessageStore = self.cql_messages
        self.archive: ArchiveStore = CqlArchive(self.session)
        self.conversations: ConversationStateStore = CqlConversationState(self.session)

    async def check(self) -> None:
        """Connect and refuse a keyspace that is missing, old or single-node without the
        development flag (EngineError naming the fix); StoreUnavailable when no node answers."""
        await self.session.open()
        await schema.check(self.session)

    async def apply_schema(self) -> list[int]:
        """qimctl schema apply: the migration versions applied now."""
        from qim.stores.cql import mailbox_schema

        await self.session.open()
        applied = await schema.apply(self.session)
        # the CQL MailboxStore's tables (docs/decisions/0102): a component of their own
        await mailbox_schema.apply(self.session)
        return applied

    async def ping(self) -> None:
        """Return when a node answers; StoreUnavailable otherwise."""
        await self.session.ping()

    async def close(self) -> None:
        """Shut the driver down."""
        await self.session.close()
