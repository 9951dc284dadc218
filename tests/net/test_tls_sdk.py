"""The SDK's connection over TLS (qim/sdk/connection.py): the gateway's
certificate is verified (a wrong CA is a TlsError naming the cause, raised by connect()
and never retried, including by the automatic reconnect: no reconnect storm), ALPN qim/1
is required, and plaintext is refused toward anything but loopback. The gateway is the
SDK tests' in-process stand-in behind a real TLS listener (ServiceNode) that counts
every handshake that failed."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from qim.dev.certs import CLIENT_PORT, DevCa, ensure_dev_pki
from qim.net.tls import ALPN, TlsFiles
from qim.obs.node import ServiceNode
from qim.sdk import ClientRuntime, ConnectionLost, ConnectionState, LocalStore, TlsError
from qim.sdk.faults import LinkFaults
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey
from tests.sdk.fakegateway import FakeGateway

KEY = SigningKey.generate()
TENANT, USER = 0, 31


class TlsFront(ServiceNode):
    """A TLS client port in front of the fake gateway."""

    service = "gateway"

    def __init__(self, files: TlsFiles, alpn=ALPN) -> None:
        super().__init__("127.0.0.1:0")
        self.tls = self.tls_contexts(files, "client port", "QIM_GATEWAY_TLS_*", alpn=alpn)

    def failed_handshakes(self) -> float:
        return sum(s.value for m in self.registry.collect() if m.name == "qim_tls_handshake_failures"
                   for s in m.samples if s.name.endswith("_total"))


@pytest.fixture
async def front(tmp_path):
    pki = ensure_dev_pki(tmp_path / "tls")
    live = tmp_path / "live"  # the gateway's certificate files, replaced in place by a test
    live.mkdir()
    for suffix in ("crt", "key"):
        shutil.copy(str(tmp_path / "tls" / f"{CLIENT_PORT}.{suffix}"), live / f"port.{suffix}")
    gw = FakeGateway(KEY)
    node = TlsFront(TlsFiles(str(live / "port.crt"), str(live / "port.key")))
    await node.start()
    server = await node.listen("127.0.0.1:0", gw._serve, tls=node.tls, name="client")
    node.addr = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]
    node.pki, node.live = pki, live
    yield node
    await node.stop()  # cancels the fake gateway's connection handlers too


def runtime(front, tmp_path, **kw) -> ClientRuntime:
    store = LocalStore.open(LocalStore.path_for(str(tmp_path), front.addr, TENANT, USER), TENANT, USER)
    return ClientRuntime(front.addr, issue_dev_token(KEY, TENANT, USER, store.device_id), store,
                         reconnect_backoff=(0.01, 0.05), **kw)


async def test_a_trusted_gateway_connects_over_tls13_with_alpn(front, tmp_path):
    rt = runtime(front, tmp_path, ca_file=front.pki.ca_file)
    await rt.connect()
    assert rt.connected and front.failed_handshakes() == 0
    await rt.close()


async def test_a_wrong_ca_is_a_clear_error_and_is_not_retried(front, tmp_path):
    other = DevCa.create("someone else's CA")
    (tmp_path / "other.crt").write_bytes(other.pem())
    rt = runtime(front, tmp_path, ca_file=str(tmp_path / "other.crt"))
    with pytest.raises(TlsError) as err:
        await rt.connect()
    assert "certificate verify failed" in str(err.value) and front.addr in str(err.value)
    assert rt.state == "offline"
    await asyncio.sleep(0.5)  # a retrying client would have tried ~10 more times by now
    assert front.failed_handshakes() == 1


async def test_the_reconnect_loop_stops_at_an_untrusted_certificate(front, tmp_path):
    told: list = []
    rt = runtime(front, tmp_path, ca_file=front.pki.ca_file, on_event=told.append, faults=LinkFaults())
    await rt.connect()
    # the gateway now presents a certificate of another CA (a botched rotation)
    DevCa.create("rogue").issue(None, front.live / "port.crt", front.live / "port.key")
    assert front.reload_tls()
    rt.faults.abort_connection()
    for _ in range(100):
        if rt.state == "offline":
            break
        await asyncio.sleep(0.02)
    assert rt.state == "offline"
    # the client gives up when it sees the certificate; the gateway counts the failed
    # handshake when the client's alert reaches it, a moment later on a busy host
    for _ in range(100):
        if front.failed_handshakes() >= 1:
            break
        await asyncio.sleep(0.02)
    attempts = front.failed_handshakes()
    assert attempts >= 1
    await asyncio.sleep(0.5)
    assert attempts == front.failed_handshakes() <= 2  # stopped: no storm against the gateway
    assert [(e.state, e.reason) for e in told if isinstance(e, ConnectionState)][-1] == ("offline", "tls refused")
    await rt.close()


async def test_a_port_without_alpn_qim1_is_refused(tmp_path):
    pki = ensure_dev_pki(tmp_path / "tls")
    node = TlsFront(pki.files(CLIENT_PORT), alpn=None)  # a TLS server that is not a QIM gateway
    await node.start()
    server = await node.listen("127.0.0.1:0", FakeGateway(KEY)._serve, tls=node.tls)
    node.addr = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]
    rt = runtime(node, tmp_path, ca_file=pki.ca_file)
    with pytest.raises(TlsError, match="ALPN qim/1"):
        await rt.connect()
    await node.stop()


async def test_plaintext_toward_tls_or_toward_a_remote_address(front, tmp_path):
    rt = runtime(front, tmp_path, plaintext=True)
    with pytest.raises(ConnectionLost):  # the TLS port closes a plaintext AUTH
        await rt.connect()
    store = LocalStore.open(":memory:", TENANT, USER)
    with pytest.raises(ValueError, match="loopback"):
        ClientRuntime("192.0.2.1:7100", issue_dev_token(KEY, TENANT, USER, store.device_id), store, plaintext=True)
