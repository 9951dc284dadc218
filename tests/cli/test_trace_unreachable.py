"""`qimctl trace` toward unreachable engines (qim/cli/qimctl_trace.py): one line on stderr
and exit 2, none of librdkafka's own log lines, Redis checked before Kafka is tried.
No engine: Kafka is a closed port, Redis a closed port or a stub answering +PONG/+OK."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MID = "0123456789ab" "0001" "0001" "0001" "00000000"  # unix_ms 48 bits, logical, region, writer, 32 zero bits


def trace(*flags: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "trace", MID, *flags], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


REPLIES = {b"PING": b"+PONG\r\n", b"HELLO": b"%1\r\n+proto\r\n:3\r\n"}  # HELLO: a RESP3 map


class RespStub:
    """A loopback TCP server that answers every RESP command +OK (PING: +PONG, HELLO: proto 3)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        f = conn.makefile("rb")
        with conn:
            while (head := f.readline()).startswith(b"*"):
                words = []
                for _ in range(int(head[1:])):
                    size = int(f.readline()[1:])
                    words.append(f.read(size + 2)[:-2])
                command = words[0].upper()
                conn.sendall(REPLIES.get(command, b"+OK\r\n"))

    def close(self) -> None:
        self.sock.close()


def test_an_unreachable_redis_is_told_before_kafka_is_tried():
    started = time.monotonic()
    proc = trace("--redis-addr", "127.0.0.1:1", "--kafka-bootstrap", "127.0.0.1:1")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("qimctl: error: redis at 127.0.0.1:1")
    assert time.monotonic() - started < 10.0  # Kafka's call would take its whole timeout


def test_a_bad_redis_address_names_the_option():
    proc = trace("--redis-addr", "bogus", "--kafka-bootstrap", "127.0.0.1:1")
    assert (proc.returncode, proc.stderr.strip()) == (2, "qimctl: error: --redis-addr: bad address 'bogus': expected host:port")


def test_an_unreachable_kafka_is_one_line_without_librdkafka_logs():
    redis = RespStub()
    try:
        proc = trace("--redis-addr", redis.addr, "--kafka-bootstrap", "127.0.0.1:1", "--timeout", "1")
    finally:
        redis.close()
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qimctl: error: kafka at 127.0.0.1:1"), proc.stderr
