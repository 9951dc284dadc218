"""The scripted server of the SDK conformance suite (docs/sdk.md "Conformance suite",
docs/decisions/0107): one player of the scenario files in tests/conformance/scenarios/,
used by both SDKs: in process by the Python runner (test_conformance.py) and as a child
process by the TypeScript runner (web/test/conformance.test.ts), over plaintext TCP on
loopback speaking the real frames (qim/net/framed.py).

A scenario is a list of steps run strictly in order. The player runs the server's steps
(`recv`, `reply`, `push`, `quiet`, `drop`); every other step is the app's and is handed
to the runner (`app_turn(index, step)`; as a child process: `{"turn": i}` on stdout,
answered by `{"done": i}` or `{"fail": i, "why": ...}` on stdin). A PING is answered
with PONG by itself; the ops of the scenario's `auto` map are answered as written there.
Field values: ints, booleans, text; "hex:…" and "utf8:…" bytes; "direct:A:B" the
direct conversation_id of users A and B (tenant 0), "group:G" that of group G; "$name" a value captured earlier.
Failures raise ScriptFailed naming the step.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from qim._core import ids
from qim.net.framed import FramedStream
from qim.proto.v1 import (
    common_pb2,
    connection_pb2,
    group_pb2,
    history_pb2,
    mailbox_pb2,
    message_pb2,
    room_pb2,
    session_pb2,
)
from qim.protocol import Opcode
from qim.sdk import direct_conversation
from tests.conformance.script import SERVER_STEPS, applies, load

_MODULES = (common_pb2, connection_pb2, group_pb2, history_pb2, mailbox_pb2, message_pb2, room_pb2, session_pb2)
RECV_TIMEOUT_S = 15.0  # generous: a busy 2-core machine; a correct client answers in milliseconds


class ScriptFailed(AssertionError):
    """The SDK did not do what the scenario says (the message names the step)."""


def message_class(op: str) -> type[Message]:
    """The protobuf class of opcode `op` by the protocol's naming (PULL_MAILBOX -> PullMailbox)."""
    name = "".join(part.capitalize() for part in op.split("_"))
    for mod in _MODULES:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise KeyError(f"no message class for opcode {op}")


@dataclass
class Frame:
    """One frame the client sent, on link number `link`."""

    link: int
    op: str
    rid: int
    msg: Message


@dataclass
class Player:
    """Plays one scenario (module docstring) for the SDK `sdk` ("py" or "js")."""

    scenario: dict
    sdk: str
    app_turn: Callable[[int, dict], Awaitable[None]]
    captured: dict[str, Any] = field(default_factory=dict)
    links: list[FramedStream] = field(default_factory=list)
    inbox: list[Frame] = field(default_factory=list)
    last: dict[str, Frame] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    server: Optional[asyncio.AbstractServer] = None

    async def start(self) -> int:
        """Listen on 127.0.0.1; returns the port."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close every link and the listener."""
        for link in self.links:
            link.abort("scenario over")
        if self.server is not None:
            self.server.close()

    async def run(self) -> None:
        """Run every step that applies to this SDK, in order. ScriptFailed."""
        for i, step in enumerate(self.scenario["steps"]):
            if not applies(step, self.sdk):
                continue
            kind = next(iter(step))  # a step's first key is its kind (script.py)
            try:
                if kind in SERVER_STEPS:
                    await getattr(self, f"_{kind}")(step)
                else:
                    await self.app_turn(i, step)
            except ScriptFailed as exc:
                raise ScriptFailed(f"{self.scenario['name']} step {i} {json.dumps(step)}: {exc}") from None

    # --- values ---------------------------------------------------------------------
    def value(self, v: Any) -> Any:
        """A script value as the wire holds it (module docstring)."""
        if isinstance(v, str):
            if v.startswith("$"):
                return self.captured[v[1:]]
            if v.startswith("hex:"):
                return bytes.fromhex(v[4:])
            if v.startswith("utf8:"):
                return v[5:].encode()
            if v.startswith("direct:"):
                a, b = (int(x) for x in v[7:].split(":"))
                return direct_conversation(0, a, b)
            if v.startswith("group:"):
                return ids.conversation_id_group(0, int(v[6:]))
        return v

    def build(self, cls: type[Message], fields: dict) -> Message:
        """A message of `cls` with `fields` (nested dicts for messages, lists for repeated)."""
        msg = cls()
        for name, v in fields.items():
            fd = cls.DESCRIPTOR.fields_by_name[name]
            sub = fd.message_type
            if fd.is_repeated:
                target = getattr(msg, name)
                for item in v:
                    if sub is not None:
                        target.add().CopyFrom(self.build(GetMessageClass(sub), item))
                    else:
                        target.append(self.value(item))
            elif sub is not None:
                getattr(msg, name).CopyFrom(self.build(GetMessageClass(sub), v))
            else:
                setattr(msg, name, self.value(v))
        return msg

    def mismatch(self, msg: Message, fields: dict, unequal: dict) -> Optional[str]:
        """Why `msg` does not hold `fields` (and differs from each of `unequal`), or None."""
        for name, want in fields.items():
            have = getattr(msg, name)
            if isinstance(want, dict):
                why = self.mismatch(have, want, {})
                if why:
                    return f"{name}.{why}"
            elif have != self.value(want):
                return f"{name} is {have!r}, the script says {self.value(want)!r}"
        for name, other in unequal.items():
            if getattr(msg, name) == self.value(other):
                return f"{name} is {getattr(msg, name)!r}, the script says it must differ"
        return None

    # --- links ----------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = FramedStream(reader, writer)
        self.links.append(stream)
        link = len(self.links) - 1
        try:
            while (frame := await stream.read_frame()) is not None:
                opcode, rid, body = frame
                op = Opcode(opcode).name
                auto = self.scenario.get("auto", {}).get(op)
                if op == "PING":
                    stream.send(Opcode.PONG, rid, connection_pb2.Pong(server_time_ms=1).SerializeToString())
                elif auto is not None:
                    stream.send(Opcode[auto["op"]], rid, self.build(message_class(auto["op"]),
                                                                     auto.get("fields", {})).SerializeToString())
                else:
                    self.inbox.append(Frame(link, op, rid, message_class(op).FromString(body)))
                    self.arrived.set()
        except (ConnectionError, OSError):
            return

    # --- the server's steps -----------------------------------------------------------
    async def _recv(self, step: dict) -> None:
        """Wait for the client's next frame of op `recv` (at most `within_ms`, else
        RECV_TIMEOUT_S); it must hold `fields` (and differ from `differ`); `capture` names
        values of it for later steps."""
        op = step["recv"]
        loop = asyncio.get_running_loop()
        wait_s = step.get("within_ms", RECV_TIMEOUT_S * 1000) / 1000
        end = loop.time() + wait_s
        while True:
            frame = next((f for f in self.inbox if f.op == op), None)
            if frame is not None:
                break
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), max(0.0, end - loop.time()))
            except asyncio.TimeoutError:
                seen = sorted({f.op for f in self.inbox})
                raise ScriptFailed(f"no {op} from the client in {wait_s:.1f} s (waiting: {seen})") from None
        self.inbox.remove(frame)
        why = self.mismatch(frame.msg, step.get("fields", {}), step.get("differ", {}))
        if why:
            raise ScriptFailed(why)
        for name, path in step.get("capture", {}).items():
            self.captured[name] = getattr(frame.msg, path)
        self.last[step.get("as", op)] = frame

    async def _reply(self, step: dict) -> None:
        """Answer the frame last received as `to` (its request id, on its link)."""
        frame = self.last[step["to"]]
        op = step["reply"]
        body = self.build(message_class(op), step.get("fields", {})).SerializeToString()
        self.links[frame.link].send(Opcode[op], frame.rid, body)

    async def _push(self, step: dict) -> None:
        """A server-initiated frame (request id 0) on the newest link."""
        op = step["push"]
        self.links[-1].send(Opcode[op], 0, self.build(message_class(op), step.get("fields", {})).SerializeToString())

    async def _quiet(self, step: dict) -> None:
        """No frame of the ops listed arrives for `ms` (already queued ones count too)."""
        ops = set(step["quiet"])
        await asyncio.sleep(step["ms"] / 1000)
        seen = [f.op for f in self.inbox if f.op in ops]
        if seen:
            raise ScriptFailed(f"the client sent {seen} where the script says it sends nothing of {sorted(ops)}")

    async def _drop(self, step: dict) -> None:
        """Close the newest link, after the frames already queued on it (as the gateway
        closes after a KICKED)."""
        link = self.links[-1]
        await link.flush()
        link.close()


async def _main(path: str, sdk: str) -> int:
    """Child-process mode (the TypeScript runner): the port, then turns on stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def say(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    async def app_turn(i: int, step: dict) -> None:
        say({"turn": i})
        answer = json.loads(await reader.readline() or b'{"fail": -1, "why": "the runner went away"}')
        if "fail" in answer:
            raise ScriptFailed(f"the app side: {answer['why']}")

    player = Player(load(path), sdk, app_turn)
    say({"port": await player.start()})
    try:
        await player.run()
        say({"end": "ok"})
        return 0
    except ScriptFailed as exc:
        say({"end": "fail", "why": str(exc)})
        return 1
    finally:
        await player.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1], sys.argv[2])))
