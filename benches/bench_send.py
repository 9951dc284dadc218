"""The gateway's send path (docs/design.md §4 "Gateway validation"): SEND_MESSAGE's
routing key read from its bytes by qim._core.sendkey.route_key, pure twin against
compiled (the `sendkey` group of benches/floors.toml).

direct: a plain 64-byte TEXT send to a direct conversation with a previous cmid (what
`qim-loadgen rate` and the SDK send most): every check and the BLAKE3 of the pair's
conversation_id (the `blake3` binding: about 0.4 µs of it on both sides). group: the
same to a group (no hash). declined: a send with mentions, refused by the fast path at
its field 10 (the caller then runs the full path). Every bench checks its result.
"""

from __future__ import annotations

from typing import Any

import pytest

from qim._core._pure import ids as pure_ids
from qim.proto.v1 import message_pb2

TENANT, ALICE, BOB = 7, 1001, 1002
DIRECT = pure_ids.conversation_id_direct(TENANT, ALICE, BOB)
GROUP = pure_ids.conversation_id_group(TENANT, 55)
_SEND: dict[str, Any] = dict(client_message_id=b"\x11" * 16, previous_client_message_id=b"\x12" * 16, message_type=1,
             body=b"hello, bob! " * 5 + b"abcd")
SENDS = {
    "direct": (message_pb2.SendMessage(conversation_id=DIRECT, recipient_user_id=BOB, **_SEND), DIRECT),
    "group": (message_pb2.SendMessage(conversation_id=GROUP, group_id=55, **_SEND), GROUP),
    "declined": (message_pb2.SendMessage(conversation_id=DIRECT, recipient_user_id=BOB, mention_user_ids=[BOB],
                                         **_SEND), None),
}


@pytest.mark.parametrize("send", list(SENDS))
@pytest.mark.benchmark(group="sendkey")
def test_route_key(benchmark, core, send) -> None:
    msg, key = SENDS[send]
    assert benchmark(core("sendkey").route_key, msg.SerializeToString(), TENANT, ALICE, 65536) == key
