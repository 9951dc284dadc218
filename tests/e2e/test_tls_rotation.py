"""Certificate rotation on a running stack (docs/operations.md "Certificates,
keys and rotation"), with the stack's own processes:

1. new leaves under the same CA, written over the files in use, then SIGHUP: new
   connections get the new certificate, established ones keep working, and nothing is
   configured anew (the allow-list trusts the CA and reads the service name);
2. a CA rotation: the CA file becomes a bundle of the old and the new CA (SIGHUP
   everywhere), the writer gets a leaf of the new CA and restarts: the gateway, which
   still presents an old-CA leaf, reaches it, and a message goes end to end.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from cryptography import x509

from qim.dev.certs import CLIENT_PORT, DevCa
from qim.net.framed import open_framed, parse_addr
from qim.net.tls import TlsContexts, client_port_context
from tests.e2e.sdkclient import client, close_all
from tests.e2e.tlsmetrics import eventually, value
from tests.sdk.realstack import users


async def reload(stack, *names: str) -> None:
    """SIGHUP `names` and wait until each counted a successful reload."""
    for name in names:
        before = value(stack, name, "qim_tls_reloads_total", result="ok")
        os.kill(stack.pids[name], signal.SIGHUP)
        await eventually(lambda n=name, b=before: value(stack, n, "qim_tls_reloads_total", result="ok") > b,
                         what=f"{name} reloaded")


async def serial_at(addr: str, ctx) -> int:
    """The serial number of the certificate a new connection to `addr` is shown."""
    host, port = parse_addr(addr)
    stream = await open_framed(host, port, tls=ctx)
    der = stream._writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    stream.abort()
    return x509.load_der_x509_certificate(der).serial_number


async def test_leaf_rotation_under_one_ca_needs_only_a_sighup(fresh_stack, tmp_path):
    st = fresh_stack
    tls_dir = Path(st.ca_file).parent
    ca = DevCa.load(tls_dir / "ca.crt", tls_dir / "ca.key")
    writer_addr = st.env["QIM_WRITER_ADDRS"].split(",")[0]
    as_gateway = TlsContexts(st.tls_files("gateway")).client
    port_before = await serial_at(st.gateway_addr, client_port_context(st.ca_file))
    writer_before = await serial_at(writer_addr, as_gateway)
    a, b = users(2)
    ca_, cb = await client(st, tmp_path, a), await client(st, tmp_path, b)
    await ca_.connect()
    await cb.connect()
    # new leaves over the files in use, then SIGHUP
    ca.issue(None, tls_dir / f"{CLIENT_PORT}.crt", tls_dir / f"{CLIENT_PORT}.key")
    ca.issue("writer", tls_dir / "writer.crt", tls_dir / "writer.key")
    await reload(st, "gateway", "writer")
    assert await serial_at(st.gateway_addr, client_port_context(st.ca_file)) != port_before
    assert await serial_at(writer_addr, as_gateway) != writer_before
    # the connections made before the rotation still carry messages
    conv = (await ca_.open_direct(b)).conversation_id
    await ca_.send_text(conv, "after the rotation")
    await eventually(lambda: any(m.body == b"after the rotation" for m in cb.store.messages(conv)),
                     what="delivered after the rotation")
    # a new device connects with the same CA file: nothing to configure
    c2 = await client(st, tmp_path, a, device=2)
    await c2.connect()
    await close_all(ca_, cb, c2)


async def test_a_ca_rotation_with_an_overlap_bundle(fresh_stack, tmp_path):
    st = fresh_stack
    tls_dir = Path(st.ca_file).parent
    old_pem = (tls_dir / "ca.crt").read_bytes()
    new_ca = DevCa.create("QIM development CA 2")
    # 1. every process trusts old + new (the CA file is the bundle), SIGHUP everywhere
    (tls_dir / "ca.crt").write_bytes(old_pem + new_ca.pem())
    await reload(st, "gateway", "writer", "mailbox", "session")
    # 2. the writer's leaf moves to the new CA; it restarts with it (or would reload)
    new_ca.issue("writer", tls_dir / "writer.crt", tls_dir / "writer.key")
    await asyncio.to_thread(st.restart_service, "writer")
    writer_addr = st.env["QIM_WRITER_ADDRS"].split(",")[0]
    shown = x509.load_pem_x509_certificate((tls_dir / "writer.crt").read_bytes())
    assert await serial_at(writer_addr, TlsContexts(st.tls_files("gateway")).client) == shown.serial_number
    # the gateway (an old-CA leaf, the bundle reloaded) reaches the new writer: a message goes through
    a, b = users(2)
    ca_, cb = await client(st, tmp_path, a), await client(st, tmp_path, b)
    await ca_.connect()
    await cb.connect()
    conv = (await ca_.open_direct(b)).conversation_id
    await ca_.send_text(conv, "across two CAs")
    await eventually(lambda: any(m.body == b"across two CAs" for m in cb.store.messages(conv)),
                     what="delivered across the CA overlap", timeout=20)
    await close_all(ca_, cb)
