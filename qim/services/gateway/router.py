"""Backend routing of the gateway (docs/design.md §5.1): one rule per backend, named by its
row in qim/topology.py.

- RENDEZVOUS (writers): highest random weight hash of the key (conversation_id) over
  the service's addresses; when the first choice is unreachable the next one is tried.
  Routing is affinity only: every writer commits correctly for every conversation.
- MODULO (mailbox by shard, session by user_id): node key mod node count (static
  assignment), no failover: only that node serves the key.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Union

import blake3

from qim.errors import ErrorCode, RequestError
from qim.net.rpc import RpcClient
from qim.net.tls import TlsContexts
from qim.topology import RENDEZVOUS, service
from qim.wire.errors import RemoteError


def rendezvous_order(key: bytes, addrs: tuple[str, ...]) -> list[int]:
    """Indexes of addrs by descending BLAKE3(addr ‖ key) weight (stable for a key)."""
    weights = [(blake3.blake3(a.encode() + b"\0" + key).digest()[:8], i) for i, a in enumerate(addrs)]
    return [i for _, i in sorted(weights, reverse=True)]


class BackendRouter:
    """RPC clients to every backend of `backends` ({service name: addresses}), each
    reached by its row's routing rule. `tls`: the gateway's internal TlsContexts (None:
    plaintext development); each backend must prove its service name in its certificate.
    `local_backends`: the LocalBackend of the backends that have one (qim/services/gateway/routes.py),
    fed the frames and losses of the connections to their nodes."""

    def __init__(self, backends: Mapping[str, tuple[str, ...]], tls: Optional[TlsContexts] = None,
                 local_backends: Optional[Mapping[str, Any]] = None, dropped: Optional[Callable[[], None]] = None) -> None:
        self._addrs = dict(backends)
        self._rules = {name: service(name).gateway for name in backends}
        self._locals = dict(local_backends or {})
        self._dropped = dropped or (lambda: None)
        self._clients = {name: [self._client(name, a, tls) for a in addrs] for name, addrs in backends.items()}

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
        when none is configured or (rendezvous) none answers; a backend's own ERROR
        reply, whatever its code, is raised at once as qim.net.rpc.RemoteError (the
        caller names the client's opcode in it)."""
        clients = self._clients.get(backend) or []
        if not clients:
            raise RequestError(ErrorCode.UNAVAILABLE, f"no {backend} service configured")
        rule = self._rules[backend]
        if rule is None or rule.routing != RENDEZVOUS:
            assert isinstance(key, int)
            return await clients[key % len(clients)].call(opcode, body)
        assert isinstance(key, bytes)
        last = RequestError(ErrorCode.UNAVAILABLE, f"no {backend} service configured")
        for i in rendezvous_order(key, self._addrs[backend]):
            try:
                return await clients[i].call(opcode, body)
            except RemoteError:
                raise
            except RequestError as exc:
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                last = exc
        raise last

    async def close(self) -> None:
        """Close every backend client."""
        for clients in self._clients.values():
            for c in clients:
                await c.close()
