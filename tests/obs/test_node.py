"""ServiceNode (qim/obs/node.py): per-node metrics, health from readiness, invariants and
supervised tasks, RPC and stream listeners tracked, and a stop that closes listeners
first, cancels connections and tasks without a traceback and closes clients in reverse
order. Real loopback sockets; no engines."""

from __future__ import annotations

import asyncio
import logging

import pytest

from qim.net.rpc import RpcClient
from qim.obs.node import ServiceNode
from qim.protocol import Opcode


class Node(ServiceNode):
    service = "test"

    def __init__(self) -> None:
        super().__init__("127.0.0.1:0")
        self.ready = False
        self.counter = self.metrics_base.counter("qim_test_bad_things", "Things that must not happen")
        self.always_zero(self.counter)
        self.closed: list[str] = []
        self.closing(self._close_first, "first")
        self.closing(self._close_second, "second")

    def _close_first(self) -> None:
        self.closed.append("first")

    async def _close_second(self) -> None:
        self.closed.append("second")

    def not_ready(self):
        if not self.ready:
            yield "not ready yet"


async def http_get(node: ServiceNode, path: str) -> tuple[int, str]:
    port = node._http.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


async def test_health_combines_readiness_and_invariants_over_http():
    node = Node()
    await node.start()
    try:
        assert await http_get(node, "/healthz") == (503, "not ready yet\n")
        node.ready = True
        assert await http_get(node, "/healthz") == (200, "ok\n")
        node.counter.inc()
        assert await http_get(node, "/healthz") == (503, "qim_test_bad_things_total=1\n")
        status, metrics = await http_get(node, "/metrics")
        assert status == 200 and "qim_test_bad_things_total 1.0" in metrics
        assert "process_cpu_seconds_total" in metrics and "python_info" in metrics  # as before issue 11
    finally:
        await node.stop()


def test_two_nodes_in_one_process_count_separately():
    a, b = Node(), Node()  # the same metric names on each: no "duplicated timeseries"
    a.counter.inc()
    assert a.metrics_base.value("qim_test_bad_things_total") == 1
    assert b.metrics_base.value("qim_test_bad_things_total") == 0


async def test_a_task_that_dies_marks_the_node_unhealthy_and_is_logged_once_with_its_traceback(caplog):
    node = Node()
    node.ready = True
    await node.start()

    async def broken() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    async def finished() -> None:
        return None

    caplog.set_level(logging.WARNING, logger="qim.test")
    node.spawn(broken(), "broken loop")
    node.spawn(finished(), "short loop")
    await asyncio.sleep(0.05)
    reasons = list(node.health())
    assert "task broken loop died: RuntimeError: boom" in reasons and "task short loop ended" in reasons
    died = [r for r in caplog.records if "broken loop" in r.getMessage()]
    assert len(died) == 1 and died[0].exc_info is not None and died[0].exc_info[0] is RuntimeError
    assert node.metrics_base.value("qim_node_task_failures_total", {"task": "broken loop"}) == 1
    assert (await http_get(node, "/healthz"))[0] == 503
    await node.stop()


async def test_stop_closes_listeners_cancels_connections_and_tasks_and_closes_clients_in_reverse(caplog):
    node = Node()
    await node.start()
    entered = asyncio.Event()
    handler_cancelled = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        entered.set()
        try:
            await reader.read()  # the peer never sends: only the stop ends this
        except asyncio.CancelledError:
            handler_cancelled.set()
            raise

    async def echo(opcode: int, body: bytes) -> tuple[int, bytes]:
        return Opcode.SEND_ACK, body

    server = await node.listen("127.0.0.1:0", hold)
    rpc = await node.serve_rpc("127.0.0.1:0", echo, 4)
    client = RpcClient("127.0.0.1:%d" % rpc.sockets[0].getsockname()[1])
    assert await client.call(Opcode.WRITER_SEND, b"x") == (Opcode.SEND_ACK, b"x")
    addr = server.sockets[0].getsockname()[:2]
    reader, writer = await asyncio.open_connection(*addr)
    await entered.wait()
    loop_cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            loop_cancelled.set()

    node.spawn(forever(), "loop")
    caplog.set_level(logging.DEBUG)
    await node.stop()
    assert handler_cancelled.is_set() and loop_cancelled.is_set()
    assert node.closed == ["second", "first"]
    assert await asyncio.wait_for(reader.read(), 2) == b""  # the held connection was dropped
    assert list(node.failures) == []  # tasks cancelled by the stop are not failures
    assert not any(r.exc_info for r in caplog.records)
    with pytest.raises(OSError):  # the listener is closed
        await asyncio.open_connection(*addr)
    await client.close()
    writer.close()


async def test_a_failing_start_stops_what_was_started():
    class Failing(Node):
        async def setup(self) -> None:
            self.spawn(asyncio.Event().wait(), "early loop")
            raise OSError("port taken")

    node = Failing()
    with pytest.raises(OSError):
        await node.start()
    assert node.closed == ["second", "first"] and node._http is not None and not node._http.is_serving()
