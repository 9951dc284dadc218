"""The SDK's room merge rules without a network (qim/sdk/rooms.py): live frames that
arrive during a join are merged after its replay by seq (nothing twice, nothing lost);
a gap in room_seq makes the SDK re-join from its last position; a replay the server
could not complete is told with `truncated` and its first seq; a post seen again in a
new epoch (retried across a RoomWriter loss) is told once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from qim.proto.v1 import room_pb2
from qim.protocol import Opcode
from qim.sdk.room_events import RoomEventsAdded
from qim.sdk.rooms import Rooms

ROOM = 77
POST = room_pb2.RoomEvent.POST


def ev(seq: int, body: bytes = b"", sender: int = 5, cmid: bytes = b"") -> room_pb2.RoomEvent:
    return room_pb2.RoomEvent(room_seq=seq, kind=POST, sender_id=sender, body=body or f"m{seq}".encode(),
                              client_message_id=cmid or seq.to_bytes(16, "big"))


class FakeRuntime:
    """Requests wait on futures the test resolves; every emitted event is kept."""

    def __init__(self) -> None:
        self.told: list = []
        self.core = SimpleNamespace(after_sync=[], emit=self.told.append, on_room_events=None)
        self.max_body_bytes, self.send_timeout, self.retry_budget_s = 1 << 20, 5.0, 5.0
        self.requests: asyncio.Queue = asyncio.Queue()

    async def request(self, opcode: int, body: bytes):
        fut = asyncio.get_running_loop().create_future()
        await self.requests.put((opcode, body, fut))
        return await fut

    def seqs(self) -> list[tuple[int, int]]:
        return [(m.room_epoch, m.room_seq) for e in self.told if isinstance(e, RoomEventsAdded) for m in e.events]


def live(epoch: int, *events) -> room_pb2.RoomEvents:
    return room_pb2.RoomEvents(room_id=ROOM, room_epoch=epoch, events=list(events))


async def test_merge_during_join_gap_rejoin_truncated_and_told_once_across_epochs():
    rt = FakeRuntime()
    rooms = Rooms(rt)
    rooms.attach()
    join = asyncio.ensure_future(rooms.join(ROOM, recent=3))
    opcode, body, fut = await rt.requests.get()
    assert opcode == Opcode.JOIN_ROOM and not room_pb2.JoinRoom.FromString(body).HasField("since")
    rt.core.on_room_events(live(5, ev(3), ev(4)))  # live frames while the join is served
    fut.set_result((Opcode.ROOM_JOINED, room_pb2.RoomJoined(room_id=ROOM, room_epoch=5, room_seq=3,
                                                            events=[ev(1), ev(2), ev(3)]).SerializeToString()))
    info = await join
    assert info.room_epoch == 5 and rt.seqs() == [(5, 1), (5, 2), (5, 3), (5, 4)]  # 3 once, 4 merged after

    rt.core.on_room_events(live(5, ev(6)))  # 5 is missing: a gap
    opcode, body, fut = await asyncio.wait_for(rt.requests.get(), 5)
    since = room_pb2.JoinRoom.FromString(body).since
    assert opcode == Opcode.JOIN_ROOM and (since.room_epoch, since.room_seq) == (5, 4)  # from the last position
    fut.set_result((Opcode.ROOM_JOINED, room_pb2.RoomJoined(room_id=ROOM, room_epoch=5, room_seq=7, truncated=True,
                                                            first_seq=6, events=[ev(6), ev(7)]).SerializeToString()))
    for _ in range(20):
        await asyncio.sleep(0)
    cut = [e for e in rt.told if isinstance(e, RoomEventsAdded) and e.truncated]
    assert len(cut) == 1 and cut[0].first_seq == 6 and [m.room_seq for m in cut[0].events] == [6, 7]

    rt.core.on_room_events(live(9))  # another epoch (the RoomWriter restarted): re-join
    opcode, body, fut = await asyncio.wait_for(rt.requests.get(), 5)
    assert room_pb2.JoinRoom.FromString(body).since.room_epoch == 5
    again = ev(1, body=b"m7", cmid=(7).to_bytes(16, "big"))  # post 7 retried into epoch 9
    fut.set_result((Opcode.ROOM_JOINED, room_pb2.RoomJoined(room_id=ROOM, room_epoch=9, room_seq=2, truncated=True,
                                                            first_seq=1, events=[again, ev(2, b"new", cmid=b"n" * 16)])
                    .SerializeToString()))
    for _ in range(20):
        await asyncio.sleep(0)
    assert rt.seqs()[-1] == (9, 2)
    bodies = [m.body for e in rt.told if isinstance(e, RoomEventsAdded) for m in e.events]
    assert bodies.count(b"m7") == 1 and bodies[-1] == b"new"
    await rooms.close()
