"""Which service may call which internal opcode (docs/design.md §4 "a per-method allow-list
on internal RPC"; docs/decisions/0022): the table of qim/topology.py (each row's
`serves` column), checked on every internal listener against the service name of the
peer's certificate (qim/net/tls.py `peer_service`).

The callers, by path (docs/operations.md "Certificates, keys and rotation"), as the rows
say them: WRITER_SEND from the gateway (client sends, group and history requests) and
qimctl (`qimctl group create` acts for the owner on the admin plane); WRITER_ADMIN
(membership edits, operator deletes) from qimctl only, never a gateway; MAILBOX_PULL and
SESSION_CALL from the gateway; PUSH_BATCH (to a gateway's push listener) and PROJECTION
(to a session node) from mailbox nodes; DEVICE_FRAMES (to a gateway's push listener)
from session nodes.
An opcode missing from the table is refused to everyone (fail closed). A refused request
is answered ERROR(FORBIDDEN) with its request id, a refused one-way frame is dropped;
both are counted (`qim_rpc_refused_total{opcode, peer_service}`) and logged without body.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping, Optional

from qim.protocol import Opcode
from qim.topology import SERVICES, rpc_allow

logger = logging.getLogger(__name__)

KNOWN_SERVICES = frozenset(SERVICES)  # the bounded values of the peer_service label
RPC_ALLOW: Mapping[int, frozenset[str]] = rpc_allow()
LOG_EVERY_S = 1.0  # refusals are logged at most once a second per listener (each is counted)


def opcode_label(opcode: int) -> str:
    """A bounded metric label: the opcode's name, or "other"."""
    return Opcode(opcode).name if opcode in Opcode._value2member_map_ else "other"


def service_label(service: Optional[str]) -> str:
    """A bounded metric label: a known service name, "none" without one, else "other"."""
    if service is None:
        return "none"
    return service if service in KNOWN_SERVICES else "other"


class RpcGuard:
    """The allow-list check of one listener.

    `enforce=False` (plaintext development, no peer identity) allows everything.
    `refused(opcode_label, peer_label)` is called for each refusal (the node's counter).
    `allows(opcode, peer)` -> bool."""

    def __init__(self, enforce: bool, refused: Optional[Callable[[str, str], None]] = None,
                 table: Mapping[int, frozenset[str]] = RPC_ALLOW, listener: str = "rpc") -> None:
        self.enforce = enforce
        self._refused = refused
        self._table = table
        self._listener = listener
        self._last_log = 0.0
        self._unlogged = 0

    def allows(self, opcode: int, peer: Optional[str]) -> bool:
        """True when `peer` (a certificate's service name, None without one) may send `opcode`."""
        if not self.enforce or (peer is not None and peer in self._table.get(opcode, ())):
            return True
        op, who = opcode_label(opcode), service_label(peer)
        if self._refused is not None:
            self._refused(op, who)
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_S:
            more = f" ({self._unlogged} more since the last line)" if self._unlogged else ""
            logger.warning("%s: refused %s (0x%04x) from service %s%s", self._listener, op, opcode, who, more)
            self._last_log, self._unlogged = now, 0
        else:
            self._unlogged += 1
        return False


OPEN = RpcGuard(enforce=False)  # listeners without a peer identity (tests, plaintext development)
