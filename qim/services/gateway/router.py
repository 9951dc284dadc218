"""Backend routing of the gateway (DESIGN.md §5.1).

Writers: rendezvous (highest random weight) hash of conversation_id over
QIM_WRITER_ADDRS; when the first choice is unreachable the next one is tried. Routing
is affinity only: every writer commits correctly for every conversation.
Mailbox and session: the node that owns the user's shard (the user's virtual bucket ->
MailboxShard, the same shard number for both kinds) in the ShardRegistry, from the
cached OwnerTable (qim/cluster/owners.py). An owner that refuses (UNAVAILABLE: not the
owner any more, or unreachable) makes the table refresh at once; the call goes once more
to the new owner when there is one (docs/decisions/0028-scale-leases-and-fencing.md).
"""

from __future__ import annotations

from typing import Optional

import blake3

from qim.cluster.owners import OwnerTable
from qim.errors import ErrorCode, RequestError
from qim.net.rpc import RpcClient
from qim.net.tls import TlsContexts
from qim.wire.errors import RemoteError


def rendezvous_order(key: bytes, addrs: tuple[str, ...]) -> list[int]:
    """Indexes of addrs by descending BLAKE3(addr ‖ key) weight (stable for a key)."""
    weights = [(blake3.blake3(a.encode() + b"\0" + key).digest()[:8], i) for i, a in enumerate(addrs)]
    return [i for _, i in sorted(weights, reverse=True)]


class BackendRouter:
    """RPC clients to writers and to shard owners, with failover for writers and owner
    lookup for mailbox and session nodes (`owners`: the OwnerTable of kinds "mailbox"
    and "session"). `tls`: the gateway's internal TlsContexts (None: plaintext
    development); `services`: the service each kind of backend must prove in its
    certificate (writer, mailbox, session)."""

    def __init__(self, writer_addrs: tuple[str, ...], owners: OwnerTable, tls: Optional[TlsContexts] = None,
                 services: tuple[Optional[str], ...] = (None, None, None)) -> None:
        self._writer_addrs = writer_addrs
        self._writers = [RpcClient(a, tls=tls, expect_service=services[0]) for a in writer_addrs]
        self.owners = owners
        self._tls = tls
        self._services = {"mailbox": services[1], "session": services[2]}
        self._owner_clients: dict[tuple[str, str], RpcClient] = {}  # (kind, addr) -> client

    async def call_writer(self, conversation_id: bytes, opcode: int, body: bytes) -> tuple[int, bytes]:
        """Send to the rendezvous writer; when it cannot be reached (RequestError
        UNAVAILABLE) try the next. Raises the last RequestError(UNAVAILABLE) when none
        answers; a writer's own ERROR reply, whatever its code, is raised at once as
        qim.net.rpc.RemoteError (the caller names the client's opcode in it)."""
        last = RequestError(ErrorCode.UNAVAILABLE, "no writer configured")
        for i in rendezvous_order(conversation_id, self._writer_addrs):
            try:
                return await self._writers[i].call(opcode, body)
            except RemoteError:
                raise
            except RequestError as exc:
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                last = exc
        raise last

    async def call_mailbox(self, shard: int, opcode: int, body: bytes) -> tuple[int, bytes]:
        """The mailbox node that owns `shard` (see the module doc); RequestError
        UNAVAILABLE when it has no live owner or the owner cannot serve it."""
        return await self._call_owner("mailbox", shard, opcode, body)

    async def call_session(self, shard: int, opcode: int, body: bytes) -> tuple[int, bytes]:
        """The session node that owns the user's shard `shard`; as call_mailbox."""
        return await self._call_owner("session", shard, opcode, body)

    def _client(self, kind: str, addr: str) -> RpcClient:
        client = self._owner_clients.get((kind, addr))
        if client is None:
            client = self._owner_clients[(kind, addr)] = RpcClient(addr, tls=self._tls,
                                                                   expect_service=self._services[kind])
        return client

    async def _call_owner(self, kind: str, shard: int, opcode: int, body: bytes) -> tuple[int, bytes]:
        owner = self.owners.owner(kind, shard)
        if owner is None:
            await self.owners.refresh(force=True)
            owner = self.owners.owner(kind, shard)
        tried = ""
        for _ in range(2):
            if owner is None:
                raise RequestError(ErrorCode.UNAVAILABLE, f"{kind} shard {shard} has no live owner (takeover in "
                                   "progress); retry")
            tried = owner.addr
            try:
                return await self._client(kind, owner.addr).call(opcode, body)
            except RequestError as exc:  # RemoteError too: the owner's own ERROR reply
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                await self.owners.refresh(force=True)
                owner = self.owners.owner(kind, shard)
                if owner is None or owner.addr == tried:
                    raise
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close every backend client."""
        for c in self._writers + list(self._owner_clients.values()):
            await c.close()
