"""Malformed connections against a live gateway, in batches, with its RSS after each.

A lone `qim-gateway` process (`lone_gateway`: the development certificates, a token key,
a Redis of its own for its ShardRegistry node lease, backends that do not exist: nothing
a malformed connection reaches needs them) takes
short connections that each send garbage and close, as a black-box fuzz of the client
port does: plaintext bytes to the TLS port, random bytes inside TLS, a frame header
with one bit flipped inside TLS (`KINDS`). The client side is cheap: it sends and closes
without waiting for an answer, so the gateway's CPU (one TLS handshake per TLS kind)
bounds the rate.

`python -m tests.gateway.malformed --total 100000` (`make soak-malformed`) runs the full
check of docs/operations.md "Memory under malformed connections": batches of 10,000, the
gateway's RSS after each, a login between batches, and exits 1 unless the RSS after the
last batch is within 20 MB of its value after the first. tests/gateway/test_malformed_memory.py
runs a smaller version of the same in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import ssl
import sys
import time
from pathlib import Path
from typing import Callable

from qim._core import frame as frame_codec
from qim.dev.lone_gateway import LoneGateway, lone_gateway
from qim.net.tls import client_port_context
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token

KINDS = ("plaintext", "tls_random", "tls_header")
CONCURRENCY = 96
HOLD_S = 0.5  # how long a connection waits for the gateway to close it (a short garbage waits for more)
BOUND_MB = 20  # the RSS after the last batch stays within this of the RSS after the first


def _garbage(rnd: random.Random) -> bytes:
    return rnd.randbytes(rnd.choice((7, 19, 64, 300, 1400)))


def _bad_header(rnd: random.Random) -> bytes:
    chunk = bytearray(frame_codec.encode_frame(Opcode.AUTH, 1, rnd.randbytes(rnd.randrange(1, 200)), False,
                                               64 * 1024)[0])
    bit = rnd.randrange(20 * 8)  # one bit of the 20-byte header: magic, version, flags, ..., crc
    chunk[bit // 8] ^= 1 << (bit % 8)
    return bytes(chunk)


async def _one(kind: str, host: str, port: int, tls: ssl.SSLContext, rnd: random.Random) -> None:
    """One connection of `kind`: connect, say it, close (errors of a refused connection are expected)."""
    try:
        if kind == "plaintext":
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(_garbage(rnd))
        else:
            reader, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=host,
                                                          ssl_handshake_timeout=30)
            writer.write(_garbage(rnd) if kind == "tls_random" else _bad_header(rnd))
        await writer.drain()
        try:  # as a fuzzer does: wait for the gateway's answer (its close), a while at most
            await asyncio.wait_for(reader.read(1024), HOLD_S)
        finally:
            writer.transport.abort()
    except (OSError, asyncio.TimeoutError):
        pass  # the gateway refused or closed first: what these connections are for


async def batch(gateway: LoneGateway, count: int, rnd: random.Random, kinds: tuple[str, ...] = KINDS) -> None:
    """`count` malformed connections, kinds in turn, CONCURRENCY at a time; then a pause
    for the gateway to finish the last ones."""
    host, port = gateway.addr.rsplit(":", 1)
    tls = client_port_context(gateway.ca_file)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def run(i: int) -> None:
        async with sem:
            await _one(kinds[i % len(kinds)], host, int(port), tls, rnd)

    await asyncio.gather(*(run(i) for i in range(count)))
    await asyncio.sleep(1.0)


async def login(gateway: LoneGateway, user: int) -> bool:
    """True when an AUTH with a valid token gets AUTH_OK (the gateway still serves)."""
    host, port = gateway.addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), ssl=client_port_context(gateway.ca_file),
                                                   server_hostname=host)
    try:
        token = issue_dev_token(gateway.token_key, 0, user, 1)
        writer.write(b"".join(frame_codec.encode_frame(Opcode.AUTH, 1, connection_pb2.Auth(
            token=token).SerializeToString(), False, 64 * 1024)))
        decoder = frame_codec.FrameDecoder()
        while True:
            data = await asyncio.wait_for(reader.read(65536), 10)
            if not data:
                return False
            for opcode, _, _ in decoder.feed(data):
                return opcode == Opcode.AUTH_OK
    finally:
        writer.close()


async def soak(gateway: LoneGateway, batches: list[int], seed: int = 1,
               report: Callable[[str], None] = lambda line: None) -> list[float]:
    """Run the batches (connection counts), a login after each; the RSS (MiB) after each.
    AssertionError when a login fails."""
    rnd = random.Random(f"qim-malformed/{seed}")
    rss = []
    done = 0
    for i, count in enumerate(batches):
        started = time.monotonic()
        await batch(gateway, count, rnd)
        done += count
        assert await login(gateway, 9_500_000 + i), f"a login failed after {done} malformed connections"
        rss.append(gateway.rss_mb())
        report(f"malformed: {done} connections, gateway rss {rss[-1]:.0f} MiB ({time.monotonic() - started:.0f} s)")
    return rss


def main() -> None:
    """The full soak (module doc); exits 1 past the bound."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--dir", default="build/soak-malformed")
    args = parser.parse_args()
    gateway = lone_gateway(Path(args.dir))
    try:
        print(f"malformed: gateway rss {gateway.rss_mb():.0f} MiB at start", flush=True)
        batches = [args.batch] * max(1, args.total // args.batch)
        rss = asyncio.run(soak(gateway, batches, report=lambda line: print(line, flush=True)))
    finally:
        gateway.stop()
    growth = rss[-1] - rss[0]
    print(f"malformed: connections={sum(batches)} rss_first_batch_mb={rss[0]:.0f} rss_last_mb={rss[-1]:.0f} "
          f"growth_mb={growth:.0f} bound_mb={BOUND_MB}")
    sys.exit(0 if growth <= BOUND_MB else 1)


if __name__ == "__main__":
    main()
