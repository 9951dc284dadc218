"""Backend routing of the gateway (docs/design.md §5.1): one rule per backend, named by its
row in qim/topology.py.

- RENDEZVOUS (writers): highest random weight hash of the key (conversation_id) over
  the service's addresses; when the first choice is unreachable, does not answer within
  ATTEMPT_TIMEOUT_S or refuses as unfit (RemoteUnfit: its clock or lease, not the
  request), the next one is tried (the failover, qim/services/gateway/failover.py). Routing is
  affinity only: every writer commits correctly for every conversation, and a send that
  reaches two writers commits once (idempotency by client_message_id in the reserve;
  docs/decisions/0079-writer-failover.md).
- MODULO: node key mod node count (static assignment), no failover: only that node
  serves the key.
- SHARD_OWNER (mailbox and session, key: the user's shard: virtual bucket ->
  MailboxShard, the same number for both kinds): the live owner of the shard in the
  ShardRegistry, from the cached OwnerTable (qim/cluster/owners.py). An owner that
  refuses (UNAVAILABLE: not the owner any more, or unreachable) makes the table refresh
  at once and the call goes once more to the new owner when there is one
  (docs/decisions/0040-scale-leases-and-fencing.md).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Protocol, Union

import blake3

from qim.cluster.owners import OwnerTable
from qim.errors import ErrorCode, RequestError
from qim.net.rpc import RpcClient, RpcTimeout
from qim.net.tls import TlsContexts
from qim.services.gateway.failover import ATTEMPT_TIMEOUT_S, CALL_TIMEOUT_S, Failover
from qim.topology import RENDEZVOUS, SHARD_OWNER, service
from qim.wire.errors import RemoteError, RemoteUnfit


def rendezvous_order(key: bytes, addrs: tuple[str, ...]) -> list[int]:
    """Indexes of addrs by descending BLAKE3(addr ‖ key) weight (stable for a key)."""
    weights = [(blake3.blake3(a.encode() + b"\0" + key).digest()[:8], i) for i, a in enumerate(addrs)]
    return [i for _, i in sorted(weights, reverse=True)]



class PushSink(Protocol):
    """What the router feeds a LocalBackend (context.py) of the connections to its
    backend's nodes: their `pushes` frames and their losses."""

    def on_push(self, addr: str, body: bytes) -> None:
        """A `pushes` frame from the backend node at `addr`."""
        ...

    def on_lost(self, addr: str) -> None:
        """The connection to the backend node at `addr` dropped."""
        ...


class BackendRouter:
    """RPC clients to every backend of `backends` ({service name: addresses}), each
    reached by its row's routing rule (SHARD_OWNER rows through `owners`, the OwnerTable
    of their kinds). `tls`: the gateway's internal TlsContexts (None: plaintext
    development); each backend must prove its service name in its certificate.
    `local_backends`: the LocalBackend of the backends that have one (qim/services/gateway/routes.py),
    fed the frames and losses of the connections to their nodes. `failovers(backend,
    reason)`: called for each request a rendezvous backend's node did not serve and the
    next one was tried (reason: "timeout", "unreachable" or "unfit")."""

    def __init__(self, backends: Mapping[str, tuple[str, ...]], tls: Optional[TlsContexts] = None,
                 owners: Optional[OwnerTable] = None, local_backends: Optional[Mapping[str, PushSink]] = None,
                 dropped: Optional[Callable[[], None]] = None,
                 failovers: Optional[Callable[[str, str], None]] = None) -> None:
        self._addrs = dict(backends)
        self._rules = {name: service(name).gateway for name in backends}
        self._tls = tls
        self.owners = owners
        self._owner_clients: dict[tuple[str, str], RpcClient] = {}  # (kind, addr) -> client
        self._locals = dict(local_backends or {})
        self._dropped = dropped or (lambda: None)
        self._failover = {name: Failover(name, addrs, failovers) for name, addrs in backends.items()
                          if self._routing(name) == RENDEZVOUS}
        self._clients = {name: [self._client(name, a, tls) for a in addrs]
                         for name, addrs in backends.items() if not self._by_owner(name)}

    def _routing(self, backend: str) -> Optional[str]:
        rule = self._rules.get(backend)
        return rule.routing if rule is not None else None

    def _by_owner(self, backend: str) -> bool:
        return self._routing(backend) == SHARD_OWNER

    def _client(self, name: str, addr: str, tls: Optional[TlsContexts]) -> RpcClient:
        """The RpcClient of one node; a backend with a LocalBackend gets its `pushes`
        frames (any other opcode is dropped, `dropped()` counts it) and connection losses."""
        local, rule = self._locals.get(name), self._rules.get(name)
        if local is None or rule is None:
            return RpcClient(addr, tls=tls, expect_service=name)
        pushes = rule.pushes

        def on_frame(opcode: int, body: bytes) -> None:
            if opcode == pushes:
                local.on_push(addr, body)
            else:
                self._dropped()

        return RpcClient(addr, tls=tls, expect_service=name, on_frame=on_frame, on_lost=lambda: local.on_lost(addr))

    def address(self, backend: str, key: Union[bytes, int]) -> str:
        """The address `key` is routed to first ("" when none is configured)."""
        addrs = self._addrs.get(backend) or ()
        if not addrs:
            return ""
        rule = self._rules[backend]
        if rule is None or rule.routing != RENDEZVOUS:
            assert isinstance(key, int)
            return addrs[key % len(addrs)]
        assert isinstance(key, bytes)
        return addrs[rendezvous_order(key, addrs)[0]]

    async def call(self, backend: str, key: Union[bytes, int], opcode: int, body: bytes) -> tuple[int, bytes]:
        """Send to the node of `backend` that `key` routes to. RequestError(UNAVAILABLE)
        when none is configured, (rendezvous) none answers or (shard owner) the shard has
        no live owner that serves it; a backend's own ERROR reply, whatever its code, is
        raised at once as qim.net.rpc.RemoteError (the caller names the client's opcode
        in it)."""
        if self._by_owner(backend):
            assert isinstance(key, int)
            return await self._call_owner(backend, key, opcode, body)
        rule = self._rules.get(backend)
        clients = self._clients.get(backend) or []
        if not clients:
            raise RequestError(ErrorCode.UNAVAILABLE, f"no {backend} service configured")
        if rule is None or rule.routing != RENDEZVOUS:
            assert isinstance(key, int)
            return await clients[key % len(clients)].call(opcode, body)
        assert isinstance(key, bytes)
        failover = self._failover[backend]
        order = failover.order(rendezvous_order(key, self._addrs[backend]))
        last = RequestError(ErrorCode.UNAVAILABLE, f"no {backend} service configured")
        for n, i in enumerate(order):
            # a node with another one after it gets ATTEMPT_TIMEOUT_S: a paused writer costs
            # a client that long, not the whole call timeout (0079)
            timeout = ATTEMPT_TIMEOUT_S if n < len(order) - 1 else CALL_TIMEOUT_S
            try:
                reply = await clients[i].call(opcode, body, timeout=timeout)
            except RemoteUnfit as exc:
                failover.failed(i, "unfit", exc.message)
                last = exc
                continue
            except RemoteError:
                raise  # the request's own answer (CONFLICT, FORBIDDEN, ...): the same on every node
            except RequestError as exc:
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                failover.failed(i, "timeout" if isinstance(exc, RpcTimeout) else "unreachable", exc.message)
                last = exc
                continue
            failover.answered(i)
            return reply
        raise last

    def _owner_client(self, kind: str, addr: str) -> RpcClient:
        client = self._owner_clients.get((kind, addr))
        if client is None:
            client = self._owner_clients[(kind, addr)] = RpcClient(addr, tls=self._tls, expect_service=kind)
        return client

    async def _call_owner(self, kind: str, shard: int, opcode: int, body: bytes) -> tuple[int, bytes]:
        if self.owners is None:
            raise RequestError(ErrorCode.UNAVAILABLE, f"no shard registry to find the {kind} owner")
        owner = self.owners.owner(kind, shard)
        if owner is None:
            await self.owners.refresh(force=True)
            owner = self.owners.owner(kind, shard)
        for _ in range(2):
            if owner is None:
                raise RequestError(ErrorCode.UNAVAILABLE, f"{kind} shard {shard} has no live owner (takeover in "
                                   "progress); retry")
            tried = owner.addr
            try:
                return await self._owner_client(kind, owner.addr).call(opcode, body)
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
        for clients in self._clients.values():
            for c in clients:
                await c.close()
        for c in self._owner_clients.values():
            await c.close()
