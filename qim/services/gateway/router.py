"""Backend routing of the gateway (docs/design.md §5.1).

Writers: rendezvous (highest random weight) hash of conversation_id over
QIM_WRITER_ADDRS; when the first choice is unreachable the next one is tried. Routing
is affinity only: every writer commits correctly for every conversation.
Mailbox: the node that owns the user's shard (static assignment, shard mod node count).
"""

from __future__ import annotations

from typing import Optional

import blake3

from qim.errors import ErrorCode, RequestError
from qim.net.rpc import RpcClient
from qim.net.tls import TlsContexts
from qim.wire.errors import RemoteError


def rendezvous_order(key: bytes, addrs: tuple[str, ...]) -> list[int]:
    """Indexes of addrs by descending BLAKE3(addr ‖ key) weight (stable for a key)."""
    weights = [(blake3.blake3(a.encode() + b"\0" + key).digest()[:8], i) for i, a in enumerate(addrs)]
    return [i for _, i in sorted(weights, reverse=True)]


class BackendRouter:
    """RPC clients to writers and mailbox nodes, with failover for writers. `tls`: the
    gateway's internal TlsContexts (None: plaintext development); `services`: the service
    each kind of backend must prove in its certificate (writer, mailbox, session)."""

    def __init__(self, writer_addrs: tuple[str, ...], mailbox_addrs: tuple[str, ...],
                 session_addrs: tuple[str, ...] = (), tls: Optional[TlsContexts] = None,
                 services: tuple[Optional[str], ...] = (None, None, None)) -> None:
        self._writer_addrs = writer_addrs
        self._writers = [RpcClient(a, tls=tls, expect_service=services[0]) for a in writer_addrs]
        self._mailboxes = [RpcClient(a, tls=tls, expect_service=services[1]) for a in mailbox_addrs]
        self._sessions = [RpcClient(a, tls=tls, expect_service=services[2]) for a in session_addrs]

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
        """The mailbox node that owns `shard` (shard mod node count)."""
        return await self._mailboxes[shard % len(self._mailboxes)].call(opcode, body)

    async def call_session(self, user_id: int, opcode: int, body: bytes) -> tuple[int, bytes]:
        """The session node of the user (user id mod node count). UNAVAILABLE when none."""
        if not self._sessions:
            raise RequestError(ErrorCode.UNAVAILABLE, "no session service configured")
        return await self._sessions[user_id % len(self._sessions)].call(opcode, body)

    async def close(self) -> None:
        """Close every backend client."""
        for c in self._writers + self._mailboxes + self._sessions:
            await c.close()
