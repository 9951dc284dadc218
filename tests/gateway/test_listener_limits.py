"""The client port's listener: one descriptor per connection, so it raises the soft
RLIMIT_NOFILE to the hard limit before it listens (a systemd default soft limit of
1,024 would refuse the 1,021st device); an accepted connection keeps one chunk in user
space and one unsent in the kernel, set up without a system call per login."""

from __future__ import annotations

import asyncio
import resource
import socket

from qim.services.gateway.listener import ClientListener, raise_nofile_limit


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard > 512, "the test needs a hard limit above 512"
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    try:
        assert raise_nofile_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Node:
    """What ClientListener uses of a ConnectionNode."""

    stopping = False

    def __init__(self) -> None:
        self.servers: list = []
        self.connections: set = set()

    def add_server(self, server) -> None:
        self.servers.append(server)

    def track(self, task) -> None:
        self.connections.add(task)
        task.add_done_callback(self.connections.discard)

    def tls_refused(self, *args) -> None:
        raise AssertionError(f"no refusal expected: {args}")


async def test_an_accepted_connection_keeps_at_most_one_chunk_unsent():
    """TCP_NOTSENT_LOWAT is set once on the listening socket and inherited (decision 0011),
    and the transport's write-buffer limit is one chunk."""
    accepted: asyncio.Queue = asyncio.Queue()

    async def serve(link) -> None:
        sock = link.get_extra_info("socket")
        await accepted.put((sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT),
                            link.transport.get_write_buffer_limits()))
        link.close()

    node = Node()
    server = await ClientListener(node, None, serve, 16 * 1024, handshake_timeout=5).start("127.0.0.1:0")
    try:
        host, port = server.sockets[0].getsockname()[:2]
        reader, writer = await asyncio.open_connection(host, port)
        lowat, (low, high) = await asyncio.wait_for(accepted.get(), 10)
        assert lowat == 16 * 1024
        assert (low, high) == (4 * 1024, 16 * 1024)
        writer.close()
    finally:
        server.close()
