"""The gateway's online registry at login: qim_gateway_online_devices stays exact
through logins, replacements and logouts, and a login costs the same whatever the
number of devices already online (no walk over them: with one, a reconnect storm of N
devices cost O(N²) on the accept path). Pure logic with stand-in connections."""

from __future__ import annotations

from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry


class Device:
    def __init__(self, user: int, device: int = 1) -> None:
        self.tenant, self.user_id, self.device_id, self.shard, self.lane = 0, user, device, 0, 0
        self.queued_bytes = 0
        self.kicked = False

    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        pass

    def kick(self) -> None:
        self.kicked = True

    def wake_when_drained(self, limit: int, wake) -> None:
        pass


class WalkCounting(dict):
    """The registry's user table, counting every walk over all users."""

    walks = 0

    def values(self):
        self.walks += 1
        return super().values()

    def items(self):
        self.walks += 1
        return super().items()

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def online(metrics: GatewayMetrics) -> float:
    return metrics.online_devices._value.get()


def test_the_online_gauge_is_exact_through_logins_replacements_and_logouts():
    metrics = GatewayMetrics()
    registry = OnlineRegistry(metrics)
    a1, a2, b1 = Device(1, 1), Device(1, 2), Device(2, 1)
    for conn in (a1, a2, b1):
        registry.register(conn)
    assert online(metrics) == 3
    a1_again = Device(1, 1)
    assert registry.register(a1_again) is a1 and a1.kicked  # a replacement is no new device
    assert online(metrics) == 3
    registry.unregister(a1)  # the replaced connection ends: a no-op
    assert online(metrics) == 3
    registry.unregister(a1_again)
    registry.unregister(b1)
    assert online(metrics) == 1
    registry.unregister(a2)
    registry.unregister(a2)  # twice: still a no-op
    assert online(metrics) == 0


def test_a_login_does_not_walk_the_devices_already_online():
    registry = OnlineRegistry(GatewayMetrics())
    users = registry._users = WalkCounting()  # type: ignore[assignment]
    conns = [Device(user) for user in range(1, 501)]
    for conn in conns:
        registry.register(conn)
    for conn in conns:
        registry.unregister(conn)
    assert users.walks == 0


def test_a_push_to_a_user_with_no_device_here_is_counted():
    """A position whose recipient holds no device on this gateway is counted, not lost
    silently (the device pulls at its next login; an operator sees stale presence)."""
    from qim.proto.v1 import internal_pb2

    metrics = GatewayMetrics()
    registry = OnlineRegistry(metrics)
    sent: list[int] = []
    here = Device(1)
    here.send = lambda opcode, request_id, body: sent.append(opcode)  # type: ignore[method-assign]
    registry.register(here)
    batch = internal_pb2.PushBatch(tenant_id=(0).to_bytes(16, "big"))
    batch.positions.add(mailbox_seq=7, user_ids=[1, 2, 3])
    registry.deliver(batch)
    assert len(sent) == 1
    assert metrics.push_no_device._value.get() == 2
    assert metrics.push_frames._value.get() == 1


def test_a_position_with_a_users_inline_entries_gives_that_users_devices_them_and_the_others_the_position():
    """decisions/0156: the mailbox's serialized entries are copied into PushEvents
    (prev_mailbox_seq, inline_entries) for the devices of the user they belong to, byte
    for byte as serializing the whole message; a user without them gets the position."""
    from qim.proto.v1 import internal_pb2, mailbox_pb2

    metrics = GatewayMetrics()
    registry = OnlineRegistry(metrics)
    frames: dict[tuple[int, int], bytes] = {}
    for user, device, lane in ((1, 1, 4), (1, 2, 4), (2, 1, 9)):
        d = Device(user, device)
        d.lane = lane
        d.send = lambda opcode, request_id, body, key=(user, device): frames.__setitem__(key, body)  # type: ignore
        registry.register(d)
    entry = mailbox_pb2.MailboxEntry(mailbox_seq=7, event_id=b"e" * 16, body=b"hello")
    batch = internal_pb2.PushBatch(tenant_id=(0).to_bytes(16, "big"))
    pos = batch.positions.add(mailbox_seq=7, message_id=b"m" * 16, user_ids=[1, 2])
    pos.inline.add(user_id=1, prev_mailbox_seq=5, entries=[entry.SerializeToString()])
    registry.deliver(batch)
    whole = mailbox_pb2.PushEvents(lane=4, mailbox_seq=7, message_ids=[b"m" * 16], prev_mailbox_seq=5,
                                   inline_entries=[entry]).SerializeToString()
    assert frames[(1, 1)] == frames[(1, 2)] == whole
    assert frames[(2, 1)] == mailbox_pb2.PushEvents(lane=9, mailbox_seq=7, message_ids=[b"m" * 16]).SerializeToString()
    assert metrics.push_inline._value.get() == 2
