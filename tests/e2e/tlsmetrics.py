"""Helpers of the TLS end-to-end tests (tests/e2e/test_tls_*.py): the TLS counters of a
service of the stack, read from its /metrics, and internal RPC clients that speak as a
given service (its development certificate from the stack's tls/ directory)."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from typing import Callable

from qim.net.rpc import RpcClient
from qim.net.tls import TlsContexts


def samples(stack, service: str, name: str) -> dict[frozenset, float]:
    """{frozenset of (label, value): value} of every sample `name` of `service`."""
    text = urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=3).read().decode()
    out = {}
    for labels, value in re.findall(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        out[frozenset(re.findall(r'(\w+)="([^"]*)"', labels))] = float(value)
    return out


def value(stack, service: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
    want = set(labels.items())
    return sum(v for k, v in samples(stack, service, name).items() if want <= k)


def handshake_failures(stack, service: str, **labels: str) -> float:
    """qim_tls_handshake_failures_total of `service` (filtered by listener=, reason=)."""
    return value(stack, service, "qim_tls_handshake_failures_total", **labels)


def refused(stack, service: str, opcode: str, peer: str) -> float:
    """qim_rpc_refused_total{opcode, peer_service} of `service`."""
    return value(stack, service, "qim_rpc_refused_total", opcode=opcode, peer_service=peer)


def speaking_as(stack, service: str, addr: str, expect: str) -> RpcClient:
    """An internal RPC client presenting `service`'s certificate to `addr` (which must
    be `expect`'s)."""
    return RpcClient(addr, tls=TlsContexts(stack.tls_files(service)), expect_service=expect)


async def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll `check` (a blocking /metrics read is fine in tests) until true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"not reached: {what}"
        await asyncio.sleep(0.1)
